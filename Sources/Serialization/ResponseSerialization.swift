import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Turns a response and its body into a value (AFNetworking's `AFURLResponseSerialization`).
///
/// A custom serializer implements one method, ``responseObject(for:data:)``; it then works as a
/// manager's `responseSerializer`, with `object(for:serializer:)` and inside a
/// ``CompoundResponseSerializer``. The other requirements have default implementations:
/// - ``responseObject(for:response:data:)``: implement it too when the result depends on the
///   request (an empty body is valid for `HEAD`); the session engine calls it with the request.
/// - ``sendableResponseObject(for:response:data:)``: boxes a `Sendable` output for the
///   manager's `DataResponse.result` and the compound serializer. `Output` need not be
///   `Sendable` (`XMLParser` is not): such a serializer's output is read directly, through
///   `object(for:serializer:)`, and it implements `sendableResponseObject` to throw
///   ``SerializationError/outputNotSendable(_:)``, as Curlew's XML serializers do. (Swift
///   cannot test for `Sendable` at run time, so the default cannot refuse by itself.)
///
/// (How Curlew's own serializers validate from the raw response head and which of them ask
/// for the concurrent processing queue is the engine's business, not this protocol's.)
public protocol ResponseSerialization<Output>: Sendable {
    /// The value produced.
    associatedtype Output

    /// Validates the response and decodes `data`.
    ///
    /// - Throws: ``SerializationError`` (unacceptable status code or content type, invalid or
    ///   empty body), carrying the response and the data.
    func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> Output

    /// Validates the response and decodes `data`, knowing the request that produced it.
    /// The default implementation ignores the request and calls ``responseObject(for:data:)``.
    func responseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws -> Output

    /// The output boxed as `any Sendable` (nil for a nil optional output), for containers such as
    /// ``CompoundResponseSerializer`` and the session engine's `DataResponse.result`. The default
    /// implementation (for a `Sendable` output) calls ``responseObject(for:response:data:)``.
    ///
    /// - Throws: ``SerializationError/outputNotSendable(_:)`` when `Output` is not `Sendable`,
    ///   and whatever ``responseObject(for:response:data:)`` throws.
    func sendableResponseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws
        -> (any Sendable)?
}

extension ResponseSerialization {
    /// Calls ``responseObject(for:data:)``; the request plays no part.
    public func responseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws -> Output {
        try responseObject(for: response, data: data)
    }
}

extension ResponseSerialization where Output: Sendable {
    /// Serializes and boxes the output; a nil optional output becomes nil. (Cast the box with
    /// `as?` to the wrapped type: a non-nil optional output may stay wrapped in its `Optional`.)
    public func sendableResponseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws
        -> (any Sendable)?
    {
        let output = try responseObject(for: request, response: response, data: data)
        if OptionalFlattening.isNone(output) { return nil }
        return output
    }
}
