import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Tries several serializers in order and returns the first non-nil result
/// (AFNetworking's `AFCompoundResponseSerializer`).
///
/// The compound first validates the response with its own ``acceptableStatusCodes`` and
/// ``acceptableContentTypes``. A serializer that throws or returns nil is skipped; so is one
/// whose output is not `Sendable` (`XMLParser`, `XMLDocument`). When none succeeds, the
/// compound returns the raw body as `Data` (AFNetworking's fallback to
/// `AFHTTPResponseSerializer`), or, with ``fallsBackToData`` set to false, rethrows the first
/// serializer's error.
public struct CompoundResponseSerializer: ResponseSerialization, EngineResponseSerialization {
    /// The serializers, tried in order.
    public private(set) var responseSerializers: [any ResponseSerialization]
    /// The status codes that pass the compound's own validation; 200..<300 by default.
    public var acceptableStatusCodes: IndexSet = ResponseValidation.defaultStatusCodes
    /// The MIME types that pass the compound's own validation; nil (any) by default.
    public var acceptableContentTypes: Set<String>?

    /// True when any of its serializers prefers the concurrent processing queue.
    package var prefersConcurrentProcessing: Bool { responseSerializers.contains { $0.enginePrefersConcurrentProcessing } }
    /// Whether the raw body is returned when no serializer succeeds; true (AFNetworking).
    public var fallsBackToData = true

    /// A compound with no serializers: it validates and returns the raw body.
    public init() {
        responseSerializers = []
    }

    /// A compound trying `responseSerializers` in order.
    public init(responseSerializers: [any ResponseSerialization]) {
        self.responseSerializers = responseSerializers
    }

    /// Throws when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try ResponseValidation.validate(
            response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// Validates, then returns the first serializer's non-nil output.
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> (any Sendable)? {
        try responseObject(for: nil, response: response, data: data)
    }

    /// Validates, then returns the first serializer's non-nil output, passing the request on.
    public func responseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws
        -> (any Sendable)?
    {
        if let response { try validate(response, data: data) }
        var firstError: (any Error)?
        for serializer in responseSerializers {
            do {
                if let value = try serializer.sendableResponseObject(for: request, response: response, data: data) {
                    return value
                }
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        if fallsBackToData || firstError == nil {
            return data
        }
        throw firstError ?? SerializationError.emptyResponseBody(response: response)
    }
}
