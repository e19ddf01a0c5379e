import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The consuming side of one streamed response: the buffer and the task that fills it.
///
/// When the last reference to it goes (every copy of the sequence and its iterator), an
/// unfinished transfer is cancelled: a stream nobody reads never holds a connection.
final class ResponseStreamConsumer: Sendable {
    let buffer: ResponseStreamBuffer
    let task: SessionTask
    /// The request's streamed body (`bytes(for:uploading:)`), if any.
    private let feed: AsyncBodyFeed?
    private let isClaimed = Atomic<Bool>(false)

    init(buffer: ResponseStreamBuffer, task: SessionTask, feed: AsyncBodyFeed? = nil) {
        self.buffer = buffer
        self.task = task
        self.feed = feed
    }

    deinit { stop() }

    /// True for the first iterator only: a stream is iterated once.
    func claimIteration() -> Bool {
        !isClaimed.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Leaves the stream: drops what is buffered and cancels the transfer if it still runs,
    /// unless its head said no body follows.
    func stop() {
        buffer.abandon()
        if !buffer.isFinished, !headEndsTheResponse { task.cancel() }
    }

    /// Whether the head received ends the response: an answer to a HEAD, a 204 or a 304, a
    /// `Content-Length: 0`. Such a transfer ends by itself in the pass that read its head, so
    /// a caller that drops the stream at once (the OpenAPI transport for a bodiless answer, a
    /// server-sent event stream answered 204) must not cancel it: the cancel would race that
    /// end, and the monitors would hear a successful call cancelled. Not while the request's
    /// own streamed body is still going out (a server that answers early and reads on): the
    /// transfer ends only when that body does, which for a live feed is never.
    private var headEndsTheResponse: Bool {
        guard let head = buffer.receivedHead else { return false }
        if let feed, !feed.isDrained { return false }
        return head.statusCode == 204 || head.statusCode == 304 || head.expectedContentLength == 0
            || task.originalRequest?.httpMethod?.uppercased() == "HEAD"
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
