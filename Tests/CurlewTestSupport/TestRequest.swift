import Foundation

/// One HTTP request as the ``TestServer`` received it, with the body fully collected.
///
/// Values are recorded in ``TestServer/requests`` and passed to route handlers.
/// Header names keep the case and order the client sent; the lookup helpers compare names
/// case-insensitively.
public struct TestRequest: Sendable {
    /// The server-assigned id of the connection the request arrived on (1, 2, 3, ... in accept order).
    ///
    /// Two requests with the same id were sent over one reused (keep-alive) connection.
    public let connectionID: Int

    /// The request method exactly as sent, e.g. `"GET"`.
    public let method: String

    /// The request target exactly as sent, e.g. `"/get?a=1"`.
    public let uri: String

    /// The HTTP version of the request line, e.g. `"HTTP/1.1"`.
    public let version: String

    /// All header fields in the order received (duplicates preserved).
    public let headers: [(name: String, value: String)]

    /// The request body (empty when there was none). De-chunked if the client used chunked encoding.
    public let body: Data

    /// Creates a request value. The server builds these; tests rarely need to.
    ///
    /// - Parameters:
    ///   - connectionID: The id of the connection the request arrived on.
    ///   - method: The request method.
    ///   - uri: The request target.
    ///   - version: The HTTP version string.
    ///   - headers: The header fields in order.
    ///   - body: The collected body.
    public init(
        connectionID: Int,
        method: String,
        uri: String,
        version: String = "HTTP/1.1",
        headers: [(name: String, value: String)],
        body: Data
    ) {
        self.connectionID = connectionID
        self.method = method
        self.uri = uri
        self.version = version
        self.headers = headers
        self.body = body
    }

    /// The path part of ``uri`` (everything before the first `?`), e.g. `"/get"`.
    public var path: String {
        if let queryStart = uri.firstIndex(of: "?") {
            return String(uri[..<queryStart])
        }
        return uri
    }

    /// The raw query string after the first `?` (without the `?`), or `nil` if the URI had none.
    public var query: String? {
        guard let queryStart = uri.firstIndex(of: "?") else { return nil }
        return String(uri[uri.index(after: queryStart)...])
    }

    /// The query parsed into percent-decoded items (empty if there is no query or it cannot be parsed).
    public var queryItems: [URLQueryItem] {
        guard let query else { return [] }
        var components = URLComponents()
        components.percentEncodedQuery = query
        return components.queryItems ?? []
    }

    /// The body decoded as UTF-8, or `nil` if it is not valid UTF-8.
    public var bodyString: String? {
        String(data: body, encoding: .utf8)
    }

    /// The value of the first header field named `name` (case-insensitive), or `nil`.
    ///
    /// - Parameter name: The header name to look up.
    /// - Returns: The first matching value.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// All values of header fields named `name` (case-insensitive), in the order received.
    ///
    /// - Parameter name: The header name to look up.
    /// - Returns: Every matching value; empty if none.
    public func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }
}
