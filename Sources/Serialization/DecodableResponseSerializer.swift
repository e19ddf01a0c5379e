import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Validates the response and decodes the body with a `JSONDecoder` into `T`
/// (Alamofire's `DecodableResponseSerializer`).
///
/// Empty bodies follow Alamofire: a nil or empty body is valid only for a status code in
/// ``emptyResponseCodes`` (204, 205) or a request method in ``emptyRequestMethods`` (`HEAD`),
/// and then only when `T` conforms to ``EmptyResponse`` (use ``Empty``); otherwise it throws
/// ``SerializationError/emptyResponseBody(response:)``.
public struct DecodableResponseSerializer<T: Decodable>: ResponseSerialization, EngineResponseSerialization {
    /// The status codes that pass validation; 200..<300 by default.
    public var acceptableStatusCodes: IndexSet = ResponseValidation.defaultStatusCodes
    /// The MIME types that pass validation; the JSON types by default, nil accepts any.
    public var acceptableContentTypes: Set<String>? = JSONResponseSerializer.defaultAcceptableContentTypes
    /// The decoder. `JSONDecoder` is a class: configure a fresh one per serializer rather than
    /// mutating one that other serializers share.
    public var decoder: JSONDecoder
    /// Status codes for which an empty body is valid; 204 and 205.
    public var emptyResponseCodes: Set<Int> = ResponseValidation.defaultEmptyResponseCodes
    /// Request methods for which an empty body is valid; `HEAD`.
    public var emptyRequestMethods: Set<String> = ResponseValidation.defaultEmptyRequestMethods

    /// A serializer with a default `JSONDecoder`.
    public init() {
        decoder = JSONDecoder()
    }

    /// A serializer using `decoder`.
    public init(decoder: JSONDecoder) {
        self.decoder = decoder
    }

    /// Throws when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try ResponseValidation.validate(
            response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// Validates and decodes; the request is unknown, so only the status code can allow an empty body.
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> T {
        try responseObject(for: nil, response: response, data: data)
    }

    /// Validates and decodes; a `HEAD` request or a 204/205 response may have an empty body.
    public func responseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws -> T {
        if let response { try validate(response, data: data) }
        return try decode(data, request: request, statusCode: response?.statusCode) { response }
    }

    /// Validates from the head (its `HTTPURLResponse` is built only for an error) and decodes.
    package func responseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> T {
        if let head {
            try ResponseValidation.validate(
                head: head, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
        }
        return try decode(data, request: request, statusCode: head?.statusCode) { head?.httpURLResponse }
    }

    /// Decodes `data`, or the empty value where an empty body is allowed; `response` is asked
    /// for only when an error must carry it.
    private func decode(
        _ data: Data?, request: URLRequest?, statusCode: Int?, response: () -> HTTPURLResponse?
    ) throws -> T {
        guard let data, !data.isEmpty else {
            let method = request?.httpMethod?.uppercased()
            let allowed = method.map { emptyRequestMethods.contains($0) } == true
                || statusCode.map { emptyResponseCodes.contains($0) } == true
            if allowed, let emptyType = T.self as? any EmptyResponse.Type, let empty = emptyType.emptyValue() as? T {
                return empty
            }
            throw SerializationError.emptyResponseBody(response: response())
        }
        do {
            return try decoder.decode(T.self, from: data)
        } catch {
            throw SerializationError.invalidBody(.decodable, response: response(), data: data, underlying: error)
        }
    }
}
