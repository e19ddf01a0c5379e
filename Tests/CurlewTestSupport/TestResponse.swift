import Foundation

/// What a ``TestServer`` route answers with.
///
/// The server serialises the response itself (no NIO encoder "fixes" anything), so a test can produce
/// exactly the bytes it wants: wrong or duplicated `Content-Length`, a missing chunked terminator, a close
/// in the middle of the body, and so on. Build one with an initialiser or a static helper, then adjust the
/// `var` properties:
///
/// ```swift
/// var response = TestResponse.text("hello")
/// response.delayBeforeHead = .milliseconds(300)
/// response.keepAlive = false
/// ```
public struct TestResponse: Sendable {
    /// One piece of a streamed body.
    public struct Chunk: Sendable {
        /// The bytes to send.
        public var data: Data
        /// How long to wait before sending this chunk (measured from the previous write).
        public var delay: Duration

        /// Creates a chunk.
        ///
        /// - Parameters:
        ///   - data: The bytes to send.
        ///   - delay: How long to wait before sending them.
        public init(_ data: Data, delay: Duration = .zero) {
            self.data = data
            self.delay = delay
        }
    }

    /// The response body.
    public enum Body: Sendable {
        /// The whole body, written at once.
        case data(Data)
        /// A body sent piece by piece, each piece after its own delay.
        case stream([Chunk])
    }

    /// How the body length is told to the client.
    public enum Framing: Sendable {
        /// `contentLength` for ``Body/data(_:)``, `chunked` for ``Body/stream(_:)``.
        case automatic
        /// Add `Content-Length` (the real body size) unless ``headers`` already has one; body sent as is.
        case contentLength
        /// Add `Transfer-Encoding: chunked` unless ``headers`` already has it; each write becomes one chunk;
        /// the `0\r\n\r\n` terminator is sent only when ``ending`` is ``Ending/complete``.
        case chunked
        /// No length at all: the body is sent as is and the connection is closed after it (EOF-delimited).
        case closeDelimited
    }

    /// What happens after the body.
    public enum Ending: Sendable {
        /// Finish normally; keep the connection open if keep-alive allows.
        case complete
        /// Close the connection right after the body bytes (for chunked, without the terminator: F2).
        /// Over TLS this is an orderly close with `close_notify`.
        case close
        /// Close the TCP socket directly, bypassing TLS (no `close_notify`: the F3 truncation case).
        /// Without TLS it is the same as ``close``.
        case closeWithoutTLSShutdown
        /// Reset the connection (RST) right after the body bytes (F22, reset mid-response).
        case reset
    }

    /// The status code, e.g. `200`.
    public var status: Int
    /// The reason phrase; `nil` uses the standard phrase for ``status`` (or `"Status"` if unknown).
    public var reason: String?
    /// Header fields, written in this order, verbatim (duplicates allowed).
    public var headers: [(name: String, value: String)]
    /// The body. Not sent for `HEAD` requests or for `1xx`, `204` and `304` statuses.
    public var body: Body
    /// How the body is framed; see ``Framing``.
    public var framing: Framing
    /// What happens after the body; see ``Ending``.
    public var ending: Ending
    /// Wait this long after the request was read before writing anything (F9 header-phase timeout).
    public var delayBeforeHead: Duration
    /// Send the head (status line and headers), then close without sending any body.
    public var closeAfterHeaders: Bool
    /// `false` adds `Connection: close` (unless present) and closes after the response; `nil` uses the
    /// server's ``TestServer/keepAlive`` and the request's `Connection` header.
    public var keepAlive: Bool?

    /// Set only by ``fault(_:)``; when non-nil the server performs the fault instead of this response.
    var fault: TestServerFault?

    /// Creates a response with a complete body.
    ///
    /// - Parameters:
    ///   - status: The status code.
    ///   - headers: Header fields, in order.
    ///   - body: The body bytes.
    public init(status: Int = 200, headers: [(name: String, value: String)] = [], body: Data = Data()) {
        self.init(status: status, headers: headers, body: .data(body))
    }

    /// Creates a response with any ``Body``.
    ///
    /// - Parameters:
    ///   - status: The status code.
    ///   - headers: Header fields, in order.
    ///   - body: The body.
    ///   - framing: How the body is framed.
    ///   - ending: What happens after the body.
    public init(
        status: Int,
        headers: [(name: String, value: String)] = [],
        body: Body,
        framing: Framing = .automatic,
        ending: Ending = .complete
    ) {
        self.status = status
        self.reason = nil
        self.headers = headers
        self.body = body
        self.framing = framing
        self.ending = ending
        self.delayBeforeHead = .zero
        self.closeAfterHeaders = false
        self.keepAlive = nil
        self.fault = nil
    }

    /// A `text/plain; charset=utf-8` response.
    ///
    /// - Parameters:
    ///   - text: The body text.
    ///   - status: The status code.
    /// - Returns: The response.
    public static func text(_ text: String, status: Int = 200) -> TestResponse {
        TestResponse(
            status: status,
            headers: [("Content-Type", "text/plain; charset=utf-8")],
            body: Data(text.utf8)
        )
    }

    /// An `application/json` response with the given (already encoded) JSON text.
    ///
    /// - Parameters:
    ///   - json: The JSON document as text.
    ///   - status: The status code.
    /// - Returns: The response.
    public static func json(_ json: String, status: Int = 200) -> TestResponse {
        TestResponse(status: status, headers: [("Content-Type", "application/json")], body: Data(json.utf8))
    }

    /// A redirect with an empty body.
    ///
    /// - Parameters:
    ///   - location: The `Location` header value (absolute or relative).
    ///   - status: The status code (301, 302, 303, 307 or 308).
    /// - Returns: The response.
    public static func redirect(to location: String, status: Int = 302) -> TestResponse {
        TestResponse(status: status, headers: [("Location", location)])
    }

    /// A streamed body: each chunk sent after its own delay, chunked by default.
    ///
    /// - Parameters:
    ///   - chunks: The pieces of the body.
    ///   - status: The status code.
    ///   - headers: Header fields, in order.
    ///   - framing: `.automatic` means chunked; `.contentLength` sends the total length up front.
    /// - Returns: The response.
    public static func stream(
        _ chunks: [Chunk],
        status: Int = 200,
        headers: [(name: String, value: String)] = [],
        framing: Framing = .automatic
    ) -> TestResponse {
        TestResponse(status: status, headers: headers, body: .stream(chunks), framing: framing)
    }

    /// Perform `fault` instead of responding; it acts after the request was fully read (see ``TestServerFault``).
    ///
    /// - Parameter fault: The fault to inject.
    /// - Returns: A response value carrying the fault.
    public static func fault(_ fault: TestServerFault) -> TestResponse {
        var response = TestResponse(status: 200)
        response.fault = fault
        return response
    }
}
