import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the session engine wants from Curlew's own serializers beyond ``ResponseSerialization``:
/// validation from the raw ``HTTPResponseHead`` and a say in where the serializer runs.
///
/// `package`, not public: these are the engine's optimisations, so a user's serializer
/// implements only ``ResponseSerialization/responseObject(for:data:)``. The engine reaches
/// them through ``ResponseSerialization/engineResponseObject(for:head:data:)`` and its
/// siblings, which fall back to the public requirements (building the head's
/// `HTTPURLResponse`) for any other serializer. Every requirement has a default, so a
/// serializer conforms for the one it needs.
package protocol EngineResponseSerialization<Output>: ResponseSerialization {
    /// Validates and decodes from the response's head. Curlew's serializers validate from the
    /// head's bytes, so an `HTTPURLResponse` nobody reads is never built (building one costs
    /// more than a small request). Default: builds it and calls
    /// ``ResponseSerialization/responseObject(for:response:data:)``.
    func responseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> Output

    /// ``responseObject(for:head:data:)``, boxed as
    /// ``ResponseSerialization/sendableResponseObject(for:response:data:)`` boxes. Default:
    /// builds the head's `HTTPURLResponse` and calls that.
    func sendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> (any Sendable)?

    /// Whether the engine runs this serializer on its shared concurrent processing queue (then
    /// the completion handler on the completion queue), as AFNetworking's processing queue
    /// did, instead of on the completion queue itself: for work heavy enough (image decoding)
    /// that responses finishing together should not wait for each other. Default: false (one
    /// hop less per response).
    var prefersConcurrentProcessing: Bool { get }
}

extension EngineResponseSerialization {
    /// False: the serializer runs on the completion queue.
    package var prefersConcurrentProcessing: Bool { false }

    /// Builds the head's `HTTPURLResponse` and calls ``ResponseSerialization/responseObject(for:response:data:)``.
    package func responseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> Output {
        try responseObject(for: request, response: head?.httpURLResponse, data: data)
    }

    /// Builds the head's `HTTPURLResponse` and calls
    /// ``ResponseSerialization/sendableResponseObject(for:response:data:)``.
    package func sendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> (any Sendable)?
    {
        try sendableResponseObject(for: request, response: head?.httpURLResponse, data: data)
    }
}

/// The engine's entry points, for any serializer: Curlew's own (``EngineResponseSerialization``)
/// take their head-based path; any other gets the head's `HTTPURLResponse`, built here.
/// Each costs one dynamic cast.
extension ResponseSerialization {
    /// ``EngineResponseSerialization/responseObject(for:head:data:)`` for Curlew's serializers,
    /// else ``ResponseSerialization/responseObject(for:response:data:)`` with the built response.
    package func engineResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> Output
    {
        if let engine = self as? any EngineResponseSerialization<Output> {
            return try engine.responseObject(for: request, head: head, data: data)
        }
        return try responseObject(for: request, response: head?.httpURLResponse, data: data)
    }

    /// ``EngineResponseSerialization/sendableResponseObject(for:head:data:)`` for Curlew's
    /// serializers, else ``ResponseSerialization/sendableResponseObject(for:response:data:)``
    /// with the built response.
    package func engineSendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> (any Sendable)?
    {
        if let engine = self as? any EngineResponseSerialization {
            return try engine.sendableResponseObject(for: request, head: head, data: data)
        }
        return try sendableResponseObject(for: request, response: head?.httpURLResponse, data: data)
    }

    /// ``EngineResponseSerialization/prefersConcurrentProcessing`` for Curlew's serializers;
    /// false for any other (it runs on the completion queue).
    package var enginePrefersConcurrentProcessing: Bool {
        (self as? any EngineResponseSerialization)?.prefersConcurrentProcessing ?? false
    }
}
