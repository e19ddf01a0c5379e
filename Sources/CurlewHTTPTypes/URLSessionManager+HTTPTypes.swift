import Foundation
import HTTPTypes
import Serialization
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSessionManager {
    /// Sends `request` with `body` and returns the raw body and the response, its fields in
    /// arrival order with repeated fields apart. As `data(for:)`: the response serializer is
    /// not applied, and a 4xx or 5xx status is a response.
    ///
    /// - Throws: ``HTTPTypesConversionError`` when `request` cannot be made a URL request;
    ///   `SessionError` for the transfer.
    public func data(for request: HTTPRequest, body: Data? = nil) async throws -> (Data, HTTPResponse) {
        var urlRequest = try URLRequest(request)
        urlRequest.httpBody = body
        let response = try await dataResponse(for: urlRequest)
        guard let head = response.head else { throw SessionError.badServerResponse("no HTTP response") }
        return (response.data ?? Data(), HTTPResponse(head))
    }

    /// Sends `request` and returns at the response head with the body as chunks; see
    /// `bytes(for:bufferSize:)`.
    public func bytes(for request: HTTPRequest, bufferSize: Int = 1 << 20) async throws -> (ResponseBytes, HTTPResponse) {
        let (bytes, response) = try await bytes(for: try URLRequest(request), bufferSize: bufferSize)
        return (bytes, Self.httpResponse(bytes, response))
    }

    /// Sends `request` with the chunks of `body` as its body and returns at the response
    /// head; see `bytes(for:uploading:length:bufferSize:)`.
    public func bytes<Body: AsyncSequence & Sendable>(
        for request: HTTPRequest, uploading body: Body, length: Int64? = nil, bufferSize: Int = 1 << 20
    ) async throws -> (ResponseBytes, HTTPResponse) where Body.Element == Data {
        let (bytes, response) = try await bytes(
            for: try URLRequest(request), uploading: body, length: length, bufferSize: bufferSize)
        return (bytes, Self.httpResponse(bytes, response))
    }

    /// Sends `request` with the chunks of `body` as its body and returns the raw response
    /// body; see `upload(for:from:length:)`. The body kept is held to the configuration's
    /// `maximumCollectedBodyBytes`, as a collected body is: a larger one fails with
    /// `SessionError.responseBodyTooLarge` (one announced larger before any of it is read), and
    /// the transfer ends.
    public func upload<Body: AsyncSequence & Sendable>(
        for request: HTTPRequest, from body: Body, length: Int64? = nil
    ) async throws -> (Data, HTTPResponse) where Body.Element == Data {
        let (bytes, response) = try await bytes(for: request, uploading: body, length: length)
        let limit = configuration.maximumCollectedBodyBytes
        guard limit > 0 else {
            var data = Data()
            for try await chunk in bytes { data.append(chunk) }
            return (data, response)
        }
        let tooLarge = SessionError.responseBodyTooLarge(limit: limit)
        // A HEAD's, 204's or 304's Content-Length announces no body that follows.
        let announcesBody = request.method != .head && response.status.code != 204 && response.status.code != 304
        if announcesBody, response.headerFields[.contentEncoding] == nil, response.headerFields[.transferEncoding] == nil,
            let announced = response.headerFields[.contentLength].flatMap({ Int64($0) }), announced > Int64(limit)
        {
            bytes.task?.cancel()  // never iterated: the transfer ends here
            throw tooLarge
        }
        var data = Data()
        for try await chunk in bytes {
            // Leaving the loop ends the transfer (`ResponseBytes`).
            guard chunk.count <= limit - data.count else { throw tooLarge }
            data.append(chunk)
        }
        return (data, response)
    }

    /// The head as received when the task has it (order and repeated fields kept).
    private static func httpResponse(_ bytes: ResponseBytes, _ response: HTTPURLResponse) -> HTTPResponse {
        if let head = bytes.responseHead { return HTTPResponse(head) }
        return HTTPResponse(response)
    }
}
