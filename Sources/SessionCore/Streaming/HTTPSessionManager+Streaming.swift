import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension HTTPSessionManager {
    /// Sends a request built by the manager's request serializer (relative to `baseURL`) and
    /// returns at the response head with the body as chunks; see
    /// `URLSessionManager.bytes(for:bufferSize:)`.
    ///
    /// The body is the caller's, so the response serializer does not parse it; the status
    /// code is checked against `acceptableStatusCodes` before the stream is handed out (the
    /// transfer is cancelled when it fails).
    ///
    /// - Throws: `SerializationError` when the request cannot be built, or
    ///   `.unacceptableStatusCode` (without a body); `SessionError` for the transfer.
    public func bytes(
        _ urlString: String, method: String = "GET", parameters: (any Sendable)? = nil,
        headers: [String: String]? = nil, acceptableStatusCodes: IndexSet = IndexSet(integersIn: 200..<300)
    ) async throws -> (ResponseBytes, HTTPURLResponse) {
        let request = try request(method: method, urlString: urlString, parameters: parameters, headers: headers)
        let (bytes, response) = try await bytes(for: request)
        guard acceptableStatusCodes.contains(response.statusCode) else {
            bytes.consumer.stop()
            throw SerializationError.unacceptableStatusCode(response.statusCode, response: response, data: nil)
        }
        return (bytes, response)
    }

    /// ``bytes(_:method:parameters:headers:acceptableStatusCodes:)`` as UTF-8 lines.
    public func lines(
        _ urlString: String, method: String = "GET", parameters: (any Sendable)? = nil,
        headers: [String: String]? = nil, acceptableStatusCodes: IndexSet = IndexSet(integersIn: 200..<300)
    ) async throws -> (ResponseLines, HTTPURLResponse) {
        let (bytes, response) = try await bytes(
            urlString, method: method, parameters: parameters, headers: headers,
            acceptableStatusCodes: acceptableStatusCodes)
        return (ResponseLines(bytes), response)
    }

    /// The server-sent events of a `GET` built by the request serializer (relative to
    /// `baseURL`); see `URLSessionManager.events(for:)`.
    ///
    /// - Throws: `SerializationError` when the request cannot be built.
    public func events(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil
    ) throws -> ServerSentEvents {
        events(for: try request(method: "GET", urlString: urlString, parameters: parameters, headers: headers))
    }
}
