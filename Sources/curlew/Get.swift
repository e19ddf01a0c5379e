import ArgumentParser
import Foundation
import Serialization
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `curlew get URL [-H 'Name: value']...`: prints the status line, the headers and the body.
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a GET request and print the status line, headers and body.")

    @Argument(help: "The URL to fetch (http or https).")
    var url: String

    @Option(name: [.customShort("H"), .customLong("header")], help: "A request header, 'Name: value'. Repeatable.")
    var headers: [String] = []

    @Option(name: .customLong("timeout"), help: "Idle timeout in seconds.")
    var timeout: Double = 60

    @Flag(name: .customLong("metrics"), help: "Print timings and connection facts to standard error.")
    var metrics = false

    func run() async throws {
        guard let target = URL(string: url) else {
            throw ValidationError("'\(url)' is not a URL")
        }
        var request = URLRequest(url: target)
        request.timeoutInterval = timeout
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else {
                throw ValidationError("header '\(header)' must look like 'Name: value'")
            }
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            var fields = request.allHTTPHeaderFields ?? [:]
            fields[name] = value  // validated by the manager: CR/LF is refused, not sent
            request.allHTTPHeaderFields = fields
        }

        let manager = URLSessionManager()
        // The tool prints whatever came back: no status or content-type validation.
        var serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(100..<1000)
        serializer.acceptableContentTypes = nil
        manager.responseSerializer = serializer
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let response = await withCheckedContinuation { continuation in
            manager.dataTask(with: request) { continuation.resume(returning: $0) }.resume()
        }
        if let error = response.error {
            FileHandle.standardError.write(Data("curlew: \(error)\n".utf8))
            throw ExitCode(1)
        }
        guard let http = response.response else { throw ExitCode(1) }
        var head = "\(response.metrics?.httpVersion ?? "HTTP/1.1") \(http.statusCode) \(HTTPURLResponse.localizedString(forStatusCode: http.statusCode).capitalized)\n"
        for (name, value) in http.allHeaderFields.sorted(by: { "\($0.key)" < "\($1.key)" }) {
            head += "\(name): \(value)\n"
        }
        FileHandle.standardOutput.write(Data((head + "\n").utf8))
        FileHandle.standardOutput.write(response.data ?? Data())
        if metrics, let facts = response.metrics {
            let line = String(
                format: "dns %.1f ms, connect %.1f ms, tls %.1f ms, first byte %.1f ms, total %.1f ms, reused %@, %@ %@\n",
                facts.domainLookupDuration * 1000, facts.connectDuration * 1000, facts.secureConnectionDuration * 1000,
                facts.timeToFirstByte * 1000, facts.taskDuration * 1000, facts.isReusedConnection ? "yes" : "no",
                facts.httpVersion ?? "?", facts.remoteAddress ?? "?")
            FileHandle.standardError.write(Data(line.utf8))
        }
    }
}
