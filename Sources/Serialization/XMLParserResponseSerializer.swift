import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Validates the response and returns an `XMLParser` over the body, ready for its delegate
/// (AFNetworking's `AFXMLParserResponseSerializer`).
///
/// With ``validatesDocument`` (the default) the body is parsed once up front, so a truncated or
/// malformed document throws ``SerializationError/invalidBody(_:response:data:underlying:)``
/// here instead of failing later inside the caller's parse. A nil or empty body throws
/// ``SerializationError/emptyResponseBody(response:)``. `XMLParser` is not `Sendable`: use the
/// parser on the thread that received it.
public struct XMLParserResponseSerializer: ResponseSerialization {
    /// AFNetworking's XML MIME types.
    public static let defaultAcceptableContentTypes: Set<String> = ["application/xml", "text/xml"]

    /// The status codes that pass validation; 200..<300 by default.
    public var acceptableStatusCodes: IndexSet = ResponseValidation.defaultStatusCodes
    /// The MIME types that pass validation; `application/xml` and `text/xml`.
    public var acceptableContentTypes: Set<String>? = XMLParserResponseSerializer.defaultAcceptableContentTypes
    /// Whether the body is checked for well-formedness before the parser is returned; true.
    public var validatesDocument = true

    /// A serializer with AFNetworking's defaults.
    public init() {}

    /// Throws when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try ResponseValidation.validate(
            response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// Validates the response and returns a parser over `data` (external entities are not resolved).
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> XMLParser {
        if let response { try validate(response, data: data) }
        guard let data, !data.isEmpty else { throw SerializationError.emptyResponseBody(response: response) }
        if validatesDocument, let problem = XMLWellFormedness.problem(in: data) {
            throw SerializationError.invalidBody(.xml, response: response, data: data, underlying: problem)
        }
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        return parser
    }

    /// Throws ``SerializationError/outputNotSendable(_:)``: `XMLParser` cannot cross concurrency
    /// domains, so it cannot be boxed (use ``responseObject(for:data:)`` directly).
    public func sendableResponseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws
        -> (any Sendable)?
    {
        throw SerializationError.outputNotSendable("XMLParser")
    }
}
