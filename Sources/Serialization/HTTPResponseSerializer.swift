import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Validates the status code and content type and returns the body unchanged
/// (AFNetworking's `AFHTTPResponseSerializer`).
///
/// A nil or empty body is valid: a 204, a 205 or the answer to `HEAD` returns it as is.
public struct HTTPResponseSerializer: ResponseSerialization, EngineResponseSerialization, Codable {
    /// The status codes that pass validation; 200..<300 by default.
    public var acceptableStatusCodes: IndexSet = ResponseValidation.defaultStatusCodes
    /// The MIME types that pass validation (compared without regard to case); nil accepts any.
    public var acceptableContentTypes: Set<String>?

    /// A serializer that accepts 2xx responses of any content type.
    public init() {}

    /// Throws when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try ResponseValidation.validate(
            response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// Validates the response (when there is one) and returns `data`.
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> Data? {
        if let response { try validate(response, data: data) }
        return data
    }

    /// Validates from the head (no `HTTPURLResponse` is built unless validation fails) and
    /// returns `data` unchanged.
    package func responseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> Data? {
        if let head {
            try ResponseValidation.validate(
                head: head, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
        }
        return data
    }

    /// ``responseObject(for:head:data:)``, boxed.
    package func sendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> (any Sendable)?
    {
        try responseObject(for: request, head: head, data: data)
    }

    private enum CodingKeys: String, CodingKey {
        case acceptableStatusCodes, acceptableContentTypes
    }

    /// Decodes the settings; missing keys keep their defaults.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        acceptableStatusCodes = try container.decodeIfPresent(IndexSet.self, forKey: .acceptableStatusCodes)
            ?? ResponseValidation.defaultStatusCodes
        acceptableContentTypes = try container.decodeIfPresent(Set<String>.self, forKey: .acceptableContentTypes)
    }

    /// Encodes the settings.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(acceptableStatusCodes, forKey: .acceptableStatusCodes)
        try container.encodeIfPresent(acceptableContentTypes, forKey: .acceptableContentTypes)
    }
}
