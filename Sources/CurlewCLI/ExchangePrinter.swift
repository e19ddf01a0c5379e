import Foundation
import Serialization
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Turns the request and the response into the text `curlew` prints.
///
/// The response head is printed as received: the status line with the server's own reason
/// phrase (`HTTPResponseHead.reasonPhrase`; HTTP/2 has none), the fields in arrival order
/// and spelling. On a terminal, what the server sent never reaches it as control
/// characters, a JSON body is re-indented and coloured (per `--pretty`), and a binary body
/// is replaced by a one-line notice. Elsewhere the body is written byte for byte.
struct ExchangePrinter: Sendable {
    var pretty: Pretty
    /// Whether standard output is a terminal.
    var isTerminal: Bool

    var style: ANSIStyle { ANSIStyle(enabled: pretty.colors) }

    // MARK: Request

    /// The request line and headers, as curlew will send them (before the engine's own
    /// transport fields such as `Accept-Encoding`).
    func requestHead(_ request: URLRequest) -> String {
        let url = request.url
        var target = "/"
        if let url, let components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
            if let query = components.percentEncodedQuery { target += "?" + query }
        }
        var lines = [
            style.paint(sanitized(request.httpMethod ?? "GET"), .bold) + " " + style.paint(sanitized(target), .cyan) + " "
                + style.paint("HTTP/1.1", .dim),
        ]
        let fields = request.allHTTPHeaderFields ?? [:]
        if fields.keys.contains(where: { $0.lowercased() == "host" }) == false, let host = url?.host {
            lines.append(headerLine("Host", url?.port.map { "\(host):\($0)" } ?? host))
        }
        for (name, value) in fields.sorted(by: { $0.key.lowercased() < $1.key.lowercased() }) {
            lines.append(headerLine(name, value))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The request body: JSON re-indented on a terminal; a streamed or file body as a notice.
    func requestBody(_ built: BuiltRequest) -> Data? {
        if let file = built.bodyFile { return Data("[body: the file \(file.path)]\n".utf8) }
        if built.request.httpBodyStream != nil {
            let length = built.request.value(forHTTPHeaderField: "Content-Length").map { "\($0) bytes, " } ?? ""
            return Data("[multipart body: \(length)streamed from the files given]\n".utf8)
        }
        guard let body = built.request.httpBody, !body.isEmpty else { return nil }
        return self.body(body, mimeType: built.request.value(forHTTPHeaderField: "Content-Type"), endWithNewline: true)
    }

    // MARK: Response

    /// The status line as sent, then each field in arrival order.
    func responseHead(_ head: HTTPResponseHead) -> String {
        var status = "\(head.statusCode)"
        if let reason = head.reasonPhrase { status += " " + reason }
        var lines = [
            style.paint(sanitized(head.httpVersion), .dim) + " " + style.paint(sanitized(status), ANSIStyle.color(forStatus: head.statusCode)),
        ]
        for (name, value) in head.fields { lines.append(headerLine(name, value)) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The response body as printed; `endWithNewline` adds a line break on a terminal when
    /// the body has none (the prompt would follow it otherwise).
    func responseBody(_ data: Data, head: HTTPResponseHead?) -> Data {
        body(data, mimeType: head?.mimeType, endWithNewline: isTerminal)
    }

    /// JSON is formatted whenever `--pretty` asks (on a pipe too, as `--pretty=format`
    /// does); everything else reaches a pipe untouched.
    private func body(_ data: Data, mimeType: String?, endWithNewline: Bool) -> Data {
        let binary = Self.isBinary(data)
        if isTerminal && binary {
            let kind = mimeType.map { " of \($0)" } ?? ""
            return Data("[binary body: \(data.count) bytes\(kind) not shown on a terminal; save it with -d, -o FILE or > FILE]\n".utf8)
        }
        var text: String
        if !binary, pretty.formats || pretty.colors,
            let formatted = JSONFormatter(style: style, reindents: pretty.formats, sanitizes: isTerminal).format(data)
        {
            text = formatted
        } else if isTerminal {
            text = String(decoding: data, as: UTF8.self).withoutControlCharacters
        } else {
            return data
        }
        if endWithNewline, !text.hasSuffix("\n") { text += "\n" }
        return Data(text.utf8)
    }

    /// Whether the bytes are not text: a NUL, or not UTF-8.
    static func isBinary(_ data: Data) -> Bool {
        if data.contains(0) { return true }
        return String(validating: data, as: UTF8.self) == nil
    }

    /// "Name: value", the name coloured, both cleaned of control characters on a terminal.
    private func headerLine(_ name: String, _ value: String) -> String {
        style.paint(sanitized(name), .cyan) + ": " + sanitized(value)
    }

    /// What the server sent, with control characters shown as `?` on a terminal.
    private func sanitized(_ text: String) -> String {
        isTerminal ? text.withoutControlCharacters : text
    }

    // MARK: Metrics

    /// The timings and connection facts of `-v`, one fact per line.
    static func metricsText(_ metrics: TaskMetrics) -> String {
        func ms(_ seconds: TimeInterval) -> String { String(format: "%.1f ms", seconds * 1000) }
        var lines = [
            "Elapsed: \(ms(metrics.taskDuration)) (dns \(ms(metrics.domainLookupDuration)), connect \(ms(metrics.connectDuration)), "
                + "tls \(ms(metrics.secureConnectionDuration)), first byte \(ms(metrics.timeToFirstByte)))",
        ]
        if let last = metrics.finalTransaction {
            let remote = [last.remoteAddress, last.remotePort.map(String.init)].compactMap { $0 }.joined(separator: ":")
            let local = [last.localAddress, last.localPort.map(String.init)].compactMap { $0 }.joined(separator: ":")
            lines.append(
                "Connection: \(last.httpVersion ?? "?") to \(remote.isEmpty ? "?" : remote) from \(local.isEmpty ? "?" : local), "
                    + (last.isReusedConnection ? "reused" : "new"))
            lines.append(
                "Bytes: \(last.requestBytesSent) sent, \(last.responseHeaderBytesReceived) head + "
                    + "\(last.responseBodyBytesReceived) body received")
        }
        lines.append("Requests: \(metrics.transactionMetrics.count), redirects followed: \(metrics.redirectCount)")
        for hop in metrics.transactionMetrics.dropLast() {
            lines.append("  \(hop.statusCode) from \(hop.url?.absoluteString ?? "?")")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
