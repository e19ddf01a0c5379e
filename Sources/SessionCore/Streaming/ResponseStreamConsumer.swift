import Foundation
import Synchronization

/// The consuming side of one streamed response: the buffer and the task that fills it.
///
/// When the last reference to it goes (every copy of the sequence and its iterator), an
/// unfinished transfer is cancelled: a stream nobody reads never holds a connection.
final class ResponseStreamConsumer: Sendable {
    let buffer: ResponseStreamBuffer
    let task: SessionTask
    private let isClaimed = Atomic<Bool>(false)

    init(buffer: ResponseStreamBuffer, task: SessionTask) {
        self.buffer = buffer
        self.task = task
    }

    deinit { stop() }

    /// True for the first iterator only: a stream is iterated once.
    func claimIteration() -> Bool {
        !isClaimed.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Leaves the stream: drops what is buffered and cancels the transfer if it still runs.
    func stop() {
        buffer.abandon()
        if !buffer.isFinished { task.cancel() }
    }

    /// The next chunk, cancelling the transfer when the waiting Swift task is cancelled.
    func next() async throws -> Data? {
        try await withTaskCancellationHandler {
            try Task.checkCancellation()
            return try await buffer.next()
        } onCancel: {
            task.cancel()
        }
    }
}

/// Ends the iteration when the iterator goes away (a `break`, a thrown error, the consuming
/// task's end), even while the sequence itself is still referenced elsewhere.
final class ResponseStreamIteration: Sendable {
    let consumer: ResponseStreamConsumer

    init(_ consumer: ResponseStreamConsumer) { self.consumer = consumer }

    deinit { consumer.stop() }
}
