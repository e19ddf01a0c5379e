import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Turns a response and its body into a value (AFNetworking's `AFURLResponseSerialization`).
///
/// Conforming types implement ``responseObject(for:data:)``. Serializers whose result depends
/// on the request (an empty body is valid for `HEAD`) also implement
/// ``responseObject(for:response:data:)``, which the session engine calls when it knows the
/// request. `Output` need not be `Sendable` (`XMLParser` is not);
/// ``sendableResponseObject(for:response:data:)`` boxes a `Sendable` output as `any Sendable`
/// (a default implementation exists when `Output: Sendable`; a serializer with a non-`Sendable`
/// output implements it, typically by throwing ``SerializationError/outputNotSendable(_:)``).
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
    /// ``CompoundResponseSerializer`` and the session engine's `DataResponse.result`.
    ///
    /// - Throws: ``SerializationError/outputNotSendable(_:)`` when `Output` is not `Sendable`,
    ///   and whatever ``responseObject(for:response:data:)`` throws.
    func sendableResponseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws
        -> (any Sendable)?

    /// Validates and decodes from the response's ``HTTPResponseHead``, the form the session
    /// engine has. The default implementation builds the head's `HTTPURLResponse` and calls
    /// ``responseObject(for:response:data:)``; Curlew's serializers validate from the head
    /// directly, so a response nobody reads is never built.
    func responseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> Output

    /// ``sendableResponseObject(for:response:data:)`` from the response's head (see
    /// ``responseObject(for:head:data:)``). The default implementation builds the head's
    /// `HTTPURLResponse`; a serializer with a head-based path implements this too.
    func sendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> (any Sendable)?

    /// Whether the session engine runs this serializer on a shared concurrent queue (then the
    /// completion handler on the completion queue), as AFNetworking's processing queue did,
    /// instead of on the completion queue itself: for work heavy enough (image decoding) that
    /// responses finishing together should not wait for each other. Default: false (one hop
    /// less per response).
    var prefersConcurrentProcessing: Bool { get }
}

extension ResponseSerialization {
    /// False: the serializer runs on the completion queue.
    public var prefersConcurrentProcessing: Bool { false }

    /// Calls ``responseObject(for:data:)``; the request plays no part.
    public func responseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws -> Output {
        try responseObject(for: response, data: data)
    }

    /// Builds the head's `HTTPURLResponse` and calls ``responseObject(for:response:data:)``.
    public func responseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> Output {
        try responseObject(for: request, response: head?.httpURLResponse, data: data)
    }

    /// Builds the head's `HTTPURLResponse` and calls ``sendableResponseObject(for:response:data:)``.
    public func sendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> (any Sendable)?
    {
        try sendableResponseObject(for: request, response: head?.httpURLResponse, data: data)
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
