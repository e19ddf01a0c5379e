import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Validates the response and parses the body as a property list
/// (AFNetworking's `AFPropertyListResponseSerializer`).
///
/// The output is the property list with Swift types, boxed as `(any Sendable)?`: `String`,
/// `Bool`, `Int`, `Double`, `Date`, `Data`, `[any Sendable]` and `[String: any Sendable]`.
/// A nil or empty body yields nil. XML and binary property lists are always read; the
/// old-style (OpenStep) text format only when ``format`` is `.openStep`, because almost any
/// text parses as an OpenStep string.
public struct PropertyListResponseSerializer: ResponseSerialization, Codable {
    /// The status codes that pass validation; 200..<300 by default.
    public var acceptableStatusCodes: IndexSet = ResponseValidation.defaultStatusCodes
    /// The MIME types that pass validation; `application/x-plist`.
    public var acceptableContentTypes: Set<String>? = ["application/x-plist"]
    /// The expected format; `.xml` by default. Set `.openStep` to accept old-style text plists.
    public var format: PropertyListSerialization.PropertyListFormat = .xml
    /// Options for `PropertyListSerialization`; none by default.
    public var readOptions: PropertyListSerialization.ReadOptions = []

    /// A serializer with AFNetworking's defaults.
    public init() {}

    /// Throws when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try ResponseValidation.validate(
            response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// Validates the response and parses the property list; nil for an empty body.
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> (any Sendable)? {
        if let response { try validate(response, data: data) }
        guard let data, !data.isEmpty else { return nil }
        var detected = PropertyListSerialization.PropertyListFormat.xml
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(from: data, options: readOptions, format: &detected)
        } catch {
            throw SerializationError.invalidBody(.propertyList, response: response, data: data, underlying: error)
        }
        if detected == .openStep && format != .openStep {
            throw SerializationError.invalidBody(
                .propertyList, response: response, data: data,
                underlying: CocoaError(.propertyListReadCorrupt,
                                       userInfo: ["NSDebugDescription": "Not an XML or binary property list"]))
        }
        do {
            return try PropertyListValue.sendable(from: object)
        } catch {
            throw SerializationError.invalidBody(.propertyList, response: response, data: data, underlying: error)
        }
    }

    private enum CodingKeys: String, CodingKey {
        case acceptableStatusCodes, acceptableContentTypes, format, readOptions
    }

    /// Decodes the settings; missing keys keep their defaults.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        acceptableStatusCodes = try container.decodeIfPresent(IndexSet.self, forKey: .acceptableStatusCodes)
            ?? ResponseValidation.defaultStatusCodes
        acceptableContentTypes = try container.decodeIfPresent(Set<String>.self, forKey: .acceptableContentTypes)
        let rawFormat = try container.decodeIfPresent(UInt.self, forKey: .format)
        format = rawFormat.flatMap(PropertyListSerialization.PropertyListFormat.init(rawValue:)) ?? .xml
        readOptions = PropertyListSerialization.ReadOptions(
            rawValue: try container.decodeIfPresent(UInt.self, forKey: .readOptions) ?? 0)
    }

    /// Encodes the settings.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(acceptableStatusCodes, forKey: .acceptableStatusCodes)
        try container.encodeIfPresent(acceptableContentTypes, forKey: .acceptableContentTypes)
        try container.encode(format.rawValue, forKey: .format)
        try container.encode(readOptions.rawValue, forKey: .readOptions)
    }
}
