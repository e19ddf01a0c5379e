import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Validates the response and parses the body into an `XMLDocument` (FoundationXML's DOM;
/// AFNetworking's `AFXMLDocumentResponseSerializer`).
///
/// Malformed or truncated XML throws ``SerializationError/invalidBody(_:response:data:underlying:)``;
/// a nil or empty body throws ``SerializationError/emptyResponseBody(response:)``.
/// `XMLDocument` is not `Sendable`: keep it on the thread that received it.
public struct XMLDocumentResponseSerializer: ResponseSerialization {
    /// The status codes that pass validation; 200..<300 by default.
    public var acceptableStatusCodes: IndexSet = ResponseValidation.defaultStatusCodes
    /// The MIME types that pass validation; `application/xml` and `text/xml`.
    public var acceptableContentTypes: Set<String>? = XMLParserResponseSerializer.defaultAcceptableContentTypes
    /// Options for `XMLDocument(data:options:)`; none by default. External entities are never
    /// loaded, whatever these say (`.nodeLoadExternalEntitiesNever` is always added); with it,
    /// FoundationXML substitutes no entity, so an internal one (`&co;`) stays a reference.
    public var options: XMLNode.Options = []

    /// A serializer with AFNetworking's defaults.
    public init() {}

    /// Throws when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try ResponseValidation.validate(
            response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// Validates the response and parses the document.
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> XMLDocument {
        if let response { try validate(response, data: data) }
        guard let data, !data.isEmpty else { throw SerializationError.emptyResponseBody(response: response) }
        // FoundationXML on Linux recovers from malformed input silently: check first.
        if let problem = XMLWellFormedness.problem(in: data) {
            throw SerializationError.invalidBody(.xml, response: response, data: data, underlying: problem)
        }
        // A response's external entity (`<!ENTITY x SYSTEM "file:///...">`) is never loaded:
        // FoundationXML asks libxml2 to substitute entities unless external ones are
        // forbidden, and libxml2 then read a local file into the document, or fetched a URL
        // the caller never asked for (XXE).
        var options = options
        options.remove(.nodeLoadExternalEntitiesAlways)
        options.remove(.nodeLoadExternalEntitiesSameOriginOnly)
        options.insert(.nodeLoadExternalEntitiesNever)
        do {
            return try XMLDocument(data: data, options: options)
        } catch {
            throw SerializationError.invalidBody(.xml, response: response, data: data, underlying: error)
        }
    }

    /// Throws ``SerializationError/outputNotSendable(_:)``: `XMLDocument` cannot cross concurrency
    /// domains, so it cannot be boxed (use ``responseObject(for:data:)`` directly).
    public func sendableResponseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws
        -> (any Sendable)?
    {
        throw SerializationError.outputNotSendable("XMLDocument")
    }
}
