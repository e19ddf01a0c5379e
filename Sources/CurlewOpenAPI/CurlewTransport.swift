import CurlewHTTPTypes
import Foundation
import HTTPTypes
import OpenAPIRuntime
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A swift-openapi-runtime `ClientTransport` that sends every request through a Curlew
/// `URLSessionManager`: the manager's `SecurityPolicy` and pins are enforced in the TLS
/// handshake, and its cookies, event monitors, metrics and limits apply, as to any
/// other task of the manager. The response body is streamed, not collected by Curlew:
/// `maximumCollectedBodyBytes` does not count it, and what bounds it in memory is how the
/// client reads it (`collect(upTo:)`).
///
/// Bodies stream both ways: a request `HTTPBody` is read as libcurl sends it (through a
/// bounded buffer), and the response `HTTPBody` is the transfer's ``ResponseBytes``, paused in
/// libcurl while the reader falls behind; no large body is ever held whole. A request body
/// that may be iterated more than once (`iterationBehavior: .multiple`, as the generated
/// client's JSON and form bodies are) and is at most ``maximumReplayableBodySize`` bytes is
/// collected first, so that it can be sent again. Cancelling the task that
/// awaits `send` or iterates the response body cancels the transfer. The manager's retrier
/// is asked about every attempt that fails: before its response head, or (a request without
/// a streamed body) with a 4xx or 5xx status, held back from the client until the retrier
/// declines; a response is never sent again once its head was handed over (its body streams
/// to the caller). A body that is streamed (read once, or larger than
/// ``maximumReplayableBodySize``) cannot be sent twice: such a call is never retried.
///
/// ```swift-fragment
/// let client = Client(serverURL: try Servers.Server1.url(), transport: CurlewTransport(manager: manager))
/// ```
public struct CurlewTransport: ClientTransport {
    /// The manager every request goes through.
    public let manager: URLSessionManager
    /// The most response bytes buffered for a slow reader before the transfer pauses.
    public var bufferSize: Int
    /// The largest request body, of those that may be iterated more than once, collected in
    /// memory so that a retry or a token refresh can send it again. Larger bodies, and bodies
    /// that can be read only once, are streamed and never sent twice. Default 1 MiB; 0 streams
    /// every body.
    public var maximumReplayableBodySize: Int

    /// A transport over `manager`.
    public init(manager: URLSessionManager, bufferSize: Int = 1 << 20) {
        self.manager = manager
        self.bufferSize = bufferSize
        maximumReplayableBodySize = 1 << 20
    }

    /// Sends `request` (its path relative to `baseURL`) with `body`, and returns at the
    /// response head with the body still streaming.
    public func send(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let urlRequest = try Self.urlRequest(for: request, baseURL: baseURL)
        let bytes: ResponseBytes
        let response: HTTPURLResponse
        var streamsBodyOfKnownLength = false
        if let body, let collected = try await replayableBytes(of: body) {
            var replayable = urlRequest
            replayable.httpBody = collected
            (bytes, response) = try await manager.bytes(for: replayable, bufferSize: bufferSize)
        } else if let body {
            let length: Int64? = if case .known(let count) = body.length { count } else { nil }
            streamsBodyOfKnownLength = length != nil
            (bytes, response) = try await manager.bytes(
                for: urlRequest, uploading: body.map { Data($0) }, length: length, bufferSize: bufferSize)
        } else {
            (bytes, response) = try await manager.bytes(for: urlRequest, bufferSize: bufferSize)
        }
        let head = bytes.responseHead.map(HTTPResponse.init) ?? HTTPResponse(response)
        // No body can follow a HEAD, a 204 or a 304: say so rather than hand out an empty one.
        if request.method == .head || head.status.code == 204 || head.status.code == 304 {
            // A streamed request body that ran past its `.known` length fails the transfer at
            // its end, through the response's bytes: with no body handed out, that error was
            // lost and the call passed for sent as declared. Wait for the end (at once, unless
            // the upload is still going) so that it is the call's. A body of unknown length
            // has no surplus: its call returns at the head, as before.
            if streamsBodyOfKnownLength { for try await _ in bytes {} }
            return (head, nil)
        }
        // libcurl decodes a content-coded body: its Content-Length is the encoded size, not
        // the length of what the body yields. With a transfer coding libcurl reads the chunks
        // to their end and ignores a Content-Length sent alongside (RFC 9112 §6.3).
        let coding = head.headerFields[.contentEncoding]?.lowercased()
        let isFramedByLength = head.headerFields[.transferEncoding] == nil
        let announced = (coding == nil || coding == "identity") && isFramedByLength ? response.expectedContentLength : -1
        return (head, HTTPBody(
            bytes.map { ArraySlice($0) }, length: announced >= 0 ? .known(announced) : .unknown,
            iterationBehavior: .single))
    }

    /// `body` whole, when it may be read again and is at most `maximumReplayableBodySize`
    /// bytes; nil when it is to be streamed. A body of unknown length is read up to the limit:
    /// past it, the part read is dropped and the body, which may be read again, is streamed
    /// from its start.
    ///
    /// - Throws: `SessionError.bodyStreamFailed` when the body's bytes are not as many as its
    ///   `.known` length says (a streamed body is held to its length as it is sent).
    func replayableBytes(of body: HTTPBody) async throws -> Data? {
        let limit = maximumReplayableBodySize
        guard body.iterationBehavior == .multiple, limit > 0 else { return nil }
        if case .known(let count) = body.length, count > Int64(limit) { return nil }
        var collected = Data()
        if case .known(let count) = body.length, count > 0 { collected.reserveCapacity(Int(count)) }
        for try await chunk in body {
            guard collected.count + chunk.count <= limit else { return nil }
            collected.append(contentsOf: chunk)
        }
        // A sequence may end quietly when its reader's task is cancelled (`AsyncStream` does):
        // what was read then is not known to be the whole body, and is never sent as one.
        try Task.checkCancellation()
        if case .known(let count) = body.length, count != Int64(collected.count) {
            throw SessionError.bodyStreamFailed("the body is \(collected.count) bytes, not the \(count) its length declares")
        }
        return collected
    }

    /// `baseURL` with the request's path appended (the base's own path kept) and the
    /// request's query; a query of `baseURL`'s own is not kept (as `URLSessionTransport`).
    static func urlRequest(for request: HTTPRequest, baseURL: URL) throws -> URLRequest {
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: true) else {
            throw HTTPTypesConversionError.invalidURL(baseURL.absoluteString)
        }
        let target = request.path ?? "/"
        // Split by hand at the first "?" (a "#" ends it): read as a URI reference, a path
        // beginning "//" (an empty first parameter, `//objects`) names a host, and its first
        // segment was dropped — the request went to another resource.
        let beforeFragment = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let parts = beforeFragment.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0])
        let query = parts.count > 1 ? String(parts[1]) : nil
        var basePath = components.percentEncodedPath
        if basePath.hasSuffix("/") { basePath.removeLast() }
        // Parsed behind a host of its own, so that `//objects` stays a path: URLComponents
        // percent-encodes what a URL cannot hold as it is (a space), and its encoded forms are
        // what the setters take (they stop the process on an invalid character).
        guard let parsed = URLComponents(string: "http://h" + (path.hasPrefix("/") ? path : "/" + path) + (query.map { "?" + $0 } ?? ""))
        else { throw HTTPTypesConversionError.invalidURL(target) }
        // A relative path (`pets`, from a middleware) is a segment below the base's path:
        // glued on, it made `/apipets`, and with a base without a path no URL at all.
        let encodedPath = path.isEmpty ? "" : parsed.percentEncodedPath
        components.percentEncodedPath = basePath + encodedPath
        components.percentEncodedQuery = parsed.percentEncodedQuery
        guard let url = components.url else { throw HTTPTypesConversionError.invalidURL(components.description) }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method.rawValue
        // The host is the base URL's: a middleware's `Host` field must name it.
        let authority = components.percentEncodedHost.map { host in components.port.map { "\(host):\($0)" } ?? host } ?? ""
        try URLRequest.checkHostField(request.headerFields, authority: authority, scheme: components.scheme)
        var seen = Set<HTTPField.Name>()
        for field in request.headerFields where field.name.canonicalName != "host" && seen.insert(field.name).inserted {
            let separator = field.name == .cookie ? "; " : ", "
            urlRequest.setValue(
                request.headerFields[values: field.name].joined(separator: separator),
                forHTTPHeaderField: field.name.rawName)
        }
        return urlRequest
    }
}
