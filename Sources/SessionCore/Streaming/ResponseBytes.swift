import Foundation
import Serialization

/// A response body as it arrives: an `AsyncSequence` of chunks, from
/// `URLSessionManager.bytes(for:)`.
///
/// Backpressure: at most a bounded buffer (1 MiB by default) waits for the consumer; beyond
/// it the transfer is paused in libcurl until the consumer catches up, so a slow reader of a
/// large body keeps memory flat. Leaving the loop, or cancelling the consuming task while it
/// waits, cancels the transfer. A transfer error ends the iteration by throwing it, after the
/// chunks received before it. The sequence can be iterated once.
public struct ResponseBytes: AsyncSequence, Sendable {
    /// A chunk of the body, as libcurl delivered it (after content decoding).
    public typealias Element = Data

    let consumer: ResponseStreamConsumer

    init(_ consumer: ResponseStreamConsumer) { self.consumer = consumer }

    /// The response head as Curlew parsed it: fields in arrival order, repeated fields apart.
    public var responseHead: HTTPResponseHead? { consumer.buffer.receivedHead }

    /// The task that runs the transfer (for its progress, metrics or `cancel()`).
    public var task: DataTask? { consumer.task as? DataTask }

    /// Creates the one iterator of this sequence; a second one throws
    /// ``ResponseStreamError/alreadyIterated``.
    public func makeAsyncIterator() -> Iterator {
        Iterator(consumer.claimIteration() ? ResponseStreamIteration(consumer) : nil)
    }

    /// Takes the chunks out of the stream's buffer, resuming the transfer as it drains.
    public struct Iterator: AsyncIteratorProtocol {
        private let iteration: ResponseStreamIteration?
        private var isDone = false

        init(_ iteration: ResponseStreamIteration?) { self.iteration = iteration }

        /// The next chunk, or nil at the end of the body.
        public mutating func next() async throws -> Data? {
            guard !isDone else { return nil }
            guard let iteration else {
                isDone = true
                throw ResponseStreamError.alreadyIterated
            }
            do {
                guard let chunk = try await iteration.consumer.next() else {
                    isDone = true
                    return nil
                }
                return chunk
            } catch {
                isDone = true
                iteration.consumer.stop()
                throw error
            }
        }
    }
}
