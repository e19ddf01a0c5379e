import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Validates the response and parses the body as JSON into a ``JSONValue``
/// (AFNetworking's `AFJSONResponseSerializer`).
///
/// A nil, empty or whitespace-only body yields nil (AFNetworking's rule), so 204 and `HEAD`
/// responses succeed. Anything else that is not JSON throws
/// ``SerializationError/invalidBody(_:response:data:underlying:)`` with the data attached.
public struct JSONResponseSerializer: ResponseSerialization, EngineResponseSerialization, Codable {
    /// AFNetworking's JSON MIME types.
    public static let defaultAcceptableContentTypes: Set<String> = ["application/json", "text/json", "text/javascript"]

    /// The status codes that pass validation; 200..<300 by default.
    public var acceptableStatusCodes: IndexSet = ResponseValidation.defaultStatusCodes
    /// The MIME types that pass validation; `application/json`, `text/json`, `text/javascript`.
    public var acceptableContentTypes: Set<String>? = JSONResponseSerializer.defaultAcceptableContentTypes
    /// Options for `JSONSerialization` (add `.fragmentsAllowed` to accept a bare number or string).
    public var readingOptions: JSONSerialization.ReadingOptions = []
    /// Whether `null`s are removed at every depth: object members whose value is `null` and
    /// `null` array elements (AFNetworking's rule; see ``JSONValue/removingKeysWithNullValues()``).
    public var removesKeysWithNullValues = false

    /// A serializer with AFNetworking's defaults.
    public init() {}

    /// Throws when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try ResponseValidation.validate(
            response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// Validates the response and parses the JSON; nil for an empty or whitespace-only body.
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> JSONValue? {
        if let response { try validate(response, data: data) }
        return try parse(data) { response }
    }

    /// Validates from the head (its `HTTPURLResponse` is built only for an error) and parses.
    package func responseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> JSONValue? {
        if let head {
            try ResponseValidation.validate(
                head: head, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
        }
        return try parse(data) { head?.httpURLResponse }
    }

    /// ``responseObject(for:head:data:)``, boxed.
    package func sendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> (any Sendable)?
    {
        try responseObject(for: request, head: head, data: data)
    }

    /// Parses `data`; `response` is asked for only when an error must carry it.
    private func parse(_ data: Data?, response: () -> HTTPURLResponse?) throws -> JSONValue? {
        guard let data, !ResponseValidation.isEmptyOrWhitespace(data) else { return nil }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: readingOptions)
        } catch {
            throw SerializationError.invalidBody(.json, response: response(), data: data, underlying: error)
        }
        let value: JSONValue
        do {
            value = try JSONValue(jsonObject: object)
        } catch {
            throw SerializationError.invalidBody(.json, response: response(), data: data, underlying: error)
        }
        return removesKeysWithNullValues ? value.removingKeysWithNullValues() : value
    }

    private enum CodingKeys: String, CodingKey {
        case acceptableStatusCodes, acceptableContentTypes, readingOptions, removesKeysWithNullValues
    }

    /// Decodes the settings; missing keys keep their defaults.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        acceptableStatusCodes = try container.decodeIfPresent(IndexSet.self, forKey: .acceptableStatusCodes)
            ?? ResponseValidation.defaultStatusCodes
        acceptableContentTypes = try container.decodeIfPresent(Set<String>.self, forKey: .acceptableContentTypes)
        readingOptions = JSONSerialization.ReadingOptions(
            rawValue: try container.decodeIfPresent(UInt.self, forKey: .readingOptions) ?? 0)
        removesKeysWithNullValues = try container.decodeIfPresent(Bool.self, forKey: .removesKeysWithNullValues)
            ?? false
    }

    /// Encodes the settings.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(acceptableStatusCodes, forKey: .acceptableStatusCodes)
        try container.encodeIfPresent(acceptableContentTypes, forKey: .acceptableContentTypes)
        try container.encode(readingOptions.rawValue, forKey: .readingOptions)
        try container.encode(removesKeysWithNullValues, forKey: .removesKeysWithNullValues)
    }
}
