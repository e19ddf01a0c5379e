import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The manager's response serializer with what the engine asks of it at every completion,
/// found once when it is set: whether it is one of Curlew's own (`EngineResponseSerialization`,
/// which serializes from the head without building Foundation's `HTTPURLResponse`), whether it
/// prefers the concurrent processing queue, and whether its output is `Data`.
///
/// Asked per completion, the first two are casts to an existential: ~800 instructions on the
/// driver thread (the queue choice) and ~570 on the completion queue (the head-based path),
/// callgrind at 64 in flight. The answers cannot change while the engine holds the serializer:
/// only Curlew's own serializers conform, and the engine keeps its own copy.
///
/// A class: each completion carries it from the driver thread to the completion queue, and
/// copying the struct (two existentials) cost ~650 instructions on the driver thread per
/// request; a reference costs a retain. Immutable, so Sendable.
final class ResolvedSerializer: Sendable {
    /// The serializer as the caller set it.
    let serializer: any ResponseSerialization
    /// `serializer` as Curlew's own, nil for any other.
    private let engine: (any EngineResponseSerialization)?
    /// Whether results are made on the concurrent processing queue, then handed to the
    /// completion queue (image decoding), instead of on the completion queue itself.
    let prefersConcurrentProcessing: Bool
    /// Whether the serializer's `Output` is `Data` or `Data?` (the raw-bytes serializer's):
    /// only then is its boxed output worth a cast to `Data`, which costs ~250 instructions per
    /// response when it fails (a JSON serializer's output).
    let producesData: Bool

    init(_ serializer: any ResponseSerialization) {
        self.serializer = serializer
        engine = serializer as? any EngineResponseSerialization
        prefersConcurrentProcessing = engine?.prefersConcurrentProcessing ?? false
        producesData = Self.outputIsData(serializer)
    }

    private static func outputIsData<S: ResponseSerialization>(_: S) -> Bool {
        S.Output.self == Data.self || S.Output.self == Data?.self
    }

    /// The serializer's output for a response: from the head for Curlew's own serializers,
    /// through the head's `HTTPURLResponse` for any other.
    func sendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> (any Sendable)? {
        if let engine {
            return try engine.sendableResponseObject(for: request, head: head, data: data)
        }
        return try serializer.sendableResponseObject(for: request, response: head?.httpURLResponse, data: data)
    }
}
