import Dispatch
import Foundation
import Logging
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Writes a manager's requests to a swift-log `Logger`: one `.info` line per completed
/// request, and each event at `.debug`.
///
/// The info line gives the method, the URL, the status (or the failure), the body bytes
/// received, the duration, whether the connection was reused and the HTTP version:
///
///     GET https://api.example.com/v1/users?page=2 → 200, 5120 bytes, 0.084 s, reused connection, HTTP/2
///
/// Secrets never reach the log: the values of `Authorization`, `Proxy-Authorization`,
/// `Cookie` and `Set-Cookie`, a URL's password, and the values of the query items named in
/// `redactedQueryItems` are written as `***` (in `Location` fields too).
public struct LoggingEventMonitor: EventMonitor {
    /// The header fields whose values are never logged (compared without case).
    public static let redactedHeaderFields: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]

    private let logger: Logger
    private let redactedQueryItems: Set<String>
    /// A serial queue of this monitor's own: lines are written in the order of the events.
    public let queue: DispatchQueue

    /// A monitor writing to `logger`.
    ///
    /// - Parameters:
    ///   - logger: Where the lines go; its log level decides whether the `.debug` details
    ///     are written.
    ///   - redactedQueryItems: Names of query items (compared without case) whose values are
    ///     written as `***`, such as `["api_key", "token"]`.
    public init(logger: Logger, redactedQueryItems: Set<String> = []) {
        self.logger = logger
        self.redactedQueryItems = Set(redactedQueryItems.map { $0.lowercased() })
        queue = DispatchQueue(label: "Curlew.LoggingEventMonitor")
    }

    // MARK: - Events

    /// Logs the task's creation at `.debug`.
    public func taskDidCreate(_ task: SessionTask) {
        debug(task, "created: \(method(of: task.originalRequest)) \(redact(task.originalRequest?.url))")
    }

    /// Logs at `.debug`.
    public func taskDidResume(_ task: SessionTask) { debug(task, "resumed") }

    /// Logs at `.debug`.
    public func taskDidSuspend(_ task: SessionTask) { debug(task, "suspended") }

    /// Logs at `.debug`.
    public func taskDidCancel(_ task: SessionTask) { debug(task, "cancelled") }

    /// Logs the request line and header fields (secrets redacted) at `.debug`.
    public func task(_ task: SessionTask, willSend request: URLRequest) {
        debug(task, "will send \(method(of: request)) \(redact(request.url)) \(fields(request.allHTTPHeaderFields ?? [:]))")
    }

    /// Logs the redirect at `.debug`.
    public func task(_ task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest: URLRequest) {
        debug(task, "redirect \(response.statusCode) → \(method(of: newRequest)) \(redact(newRequest.url))")
    }

    /// Logs the status and header fields (secrets redacted) at `.debug`.
    ///
    /// Read from Curlew's parsed head (``receivesFoundationResponses`` is false): logging a
    /// response never builds Foundation's `HTTPURLResponse`, and the fields are only
    /// formatted when `.debug` is enabled.
    public func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) {
        debug(task, "received \(head.statusCode) \(fields(head.headerDictionary))")
    }

    /// False: the response is logged from its head (``task(_:didReceiveHead:)``).
    public var receivesFoundationResponses: Bool { false }

    /// Logs the coming retry at `.debug`.
    public func task(_ task: SessionTask, willRetryAfter delay: TimeInterval, dueTo error: any Error) {
        debug(task, "will retry after \(delay) s: \(scrub(error))")
    }

    /// Logs the wait for a route at `.info`: the task is stalled, not failing.
    public func taskIsWaitingForConnectivity(_ task: SessionTask) {
        info(task, "waiting for connectivity: no route to the host")
    }

    /// Logs the number of exchanges and the duration at `.debug`.
    public func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
        debug(task, "metrics: \(metrics.transactionMetrics.count) exchange(s), \(Self.seconds(metrics.taskDuration)), \(metrics.redirectCount) redirect(s)")
    }

    /// Logs the completion at `.debug`.
    public func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) {
        debug(task, error.map { "completed with error: \(scrub($0))" } ?? "completed")
    }

    /// Writes the request's `.info` line.
    public func task(_ task: SessionTask, didProduce response: DataResponse) {
        let request = response.request ?? task.originalRequest
        let outcome: String
        switch (response.head, response.error) {
        case (let head?, nil): outcome = "\(head.statusCode)"
        case (let head?, let error as SessionError): outcome = "\(head.statusCode), failed: \(scrub(error))"
        // A serializer's error may quote the body: only its kind is written.
        case (let head?, let error?): outcome = "\(head.statusCode), not serialized (\(type(of: error)))"
        case (nil, let error?): outcome = "failed: \(scrub(error))"
        case (nil, nil): outcome = "no response"
        }
        let metrics = response.metrics
        let duration = metrics.map { Self.seconds($0.taskDuration) } ?? "-"
        let reuse = metrics?.finalTransaction == nil
            ? "no connection" : (metrics?.isReusedConnection == true ? "reused connection" : "new connection")
        let version = metrics?.httpVersion ?? response.head?.httpVersion ?? "-"
        logger.info(
            "\(method(of: request)) \(redact(request?.url)) → \(outcome), \(task.countOfBytesReceived) bytes, \(duration), \(reuse), \(version)",
            metadata: ["curlew.task": "\(task.taskIdentifier)"])
    }

    /// Logs at `.debug`.
    public func managerDidInvalidate(_ manager: URLSessionManager, error: (any Error)?) {
        logger.debug("manager invalidated\(error.map { ": \(scrub($0))" } ?? "")")
    }

    // MARK: - Redaction

    /// `url` as text, with its password and the named query items' values written `***`.
    func redact(_ url: URL?) -> String {
        guard let url else { return "-" }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "***" }
        // The encoded form: `password` is nil for an escape that is not UTF-8 (`p%E9ss`).
        if components.percentEncodedPassword != nil { components.percentEncodedPassword = "***" }
        if !redactedQueryItems.isEmpty, let items = components.percentEncodedQueryItems {
            components.percentEncodedQueryItems = items.map { item in
                let name = (item.name.removingPercentEncoding ?? item.name).lowercased()
                guard redactedQueryItems.contains(name), item.value != nil else { return item }
                return URLQueryItem(name: item.name, value: "***")
            }
        }
        return components.string ?? "***"
    }

    /// An error's text with the secrets of any URL in it written `***`: the password of a
    /// `scheme://user:password@` and the values of the redacted query items. Errors quote
    /// URLs (a status refused by the validation names the response's URL, an interceptor's
    /// error may name anything): logged as they were, a retry's line gave the password away.
    func scrub(_ error: any Error) -> String {
        scrubbingQueryItems(Self.scrubbingPasswords("\(error)"))
    }

    /// `text` with the password of every `scheme://user:password@` in it written `***`.
    static func scrubbingPasswords(_ text: String) -> String {
        var text = Substring(text)
        var result = ""
        // Passwords: between the `:` and the last `@` of an authority that follows a `://`.
        while let scheme = text.range(of: "://") {
            result += text[..<scheme.upperBound]
            text = text[scheme.upperBound...]
            let authorityEnd = text.firstIndex { "/?# \n\t\"'<>".contains($0) } ?? text.endIndex
            let authority = text[..<authorityEnd]
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                result += text[...colon] + "***"
                text = text[at...]
            }
        }
        result += text
        return result
    }

    /// `text` with the values of the redacted query items written `***`: `name=value` after a
    /// `?` or `&`, up to the next `&`, `#` or space.
    private func scrubbingQueryItems(_ text: String) -> String {
        guard !redactedQueryItems.isEmpty else { return text }
        var scrubbed = ""
        var rest = Substring(text)
        while let separator = rest.firstIndex(where: { $0 == "?" || $0 == "&" }) {
            scrubbed += rest[...separator]
            rest = rest[rest.index(after: separator)...]
            guard let equals = rest.firstIndex(of: "="),
                !rest[..<equals].contains(where: { "?&# \n".contains($0) })
            else { continue }
            let name = String(rest[..<equals])
            guard redactedQueryItems.contains((name.removingPercentEncoding ?? name).lowercased()) else { continue }
            let valueEnd = rest[equals...].firstIndex { "&# \n\t\"'<>".contains($0) } ?? rest.endIndex
            scrubbed += rest[...equals] + "***"
            rest = rest[valueEnd...]
        }
        return scrubbed + rest
    }

    /// Header fields as `[Name: value, …]`, sorted by name, secrets written `***`.
    func fields(_ headers: [String: String]) -> String {
        let lines = headers.sorted { $0.key.lowercased() < $1.key.lowercased() }.map { name, value -> String in
            let lowered = name.lowercased()
            if Self.redactedHeaderFields.contains(lowered) { return "\(name): ***" }
            if lowered == "location" { return "\(name): \(redact(URL(string: value)))" }
            return "\(name): \(value)"
        }
        return "[" + lines.joined(separator: ", ") + "]"
    }

    // MARK: - Helpers

    private func debug(_ task: SessionTask, _ message: @autoclosure () -> String) {
        logger.debug("task #\(task.taskIdentifier) \(message())", metadata: ["curlew.task": "\(task.taskIdentifier)"])
    }

    private func info(_ task: SessionTask, _ message: @autoclosure () -> String) {
        logger.info("task #\(task.taskIdentifier) \(message())", metadata: ["curlew.task": "\(task.taskIdentifier)"])
    }

    private func method(of request: URLRequest?) -> String { request?.httpMethod ?? "GET" }

    private static func seconds(_ value: TimeInterval) -> String {
        String(format: "%.3f s", value)
    }
}
