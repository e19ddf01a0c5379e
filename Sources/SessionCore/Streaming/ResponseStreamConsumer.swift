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
    /// unless it ends by itself (`headEndsTheResponse`).
    func stop() {
        buffer.abandon()
        if !buffer.isFinished, !headEndsTheResponse { task.cancel() }
    }

    /// Whether the response ends by itself: an answer to a HEAD, a 204 or a 304, a
    /// `Content-Length: 0`, or a small announced body nearly or wholly in. Such a transfer
    /// ends by itself in the pass that read its head, so a caller that drops the stream at once (the OpenAPI transport for a bodiless answer, a
    /// server-sent event stream answered 204) must not cancel it: the cancel would race that
    /// end, and the monitors would hear a successful call cancelled. Not while the request's
    /// own streamed body is still going out (a server that answers early and reads on): the
    /// transfer ends only when that body does, which for a live feed is never.
    ///
    /// The same for a small body announced by `Content-Length` (up to `drainedRemainder`
    /// bytes still to come, within the buffer's limit, so the transfer never pauses for
    /// a consumer that left): an answer the caller does not read (an OpenAPI response without
    /// a schema) usually came with its head, and is read to its end rather than cancelled —
    /// whether its bytes reached the buffer before the caller let go is a race the cancel
    /// lost for a few calls in a hundred. The connection is kept.
    private var headEndsTheResponse: Bool {
        guard let head = buffer.receivedHead else { return false }
        if let feed, !feed.isDrained { return false }
        if head.statusCode == 204 || head.statusCode == 304 || head.expectedContentLength == 0
            || task.originalRequest?.httpMethod?.uppercased() == "HEAD"
        {
            return true
        }
        // Not content-coded (the chunks are the announced bytes, no more), and framed by its
        // length alone: with `Transfer-Encoding` libcurl reads the chunks to their end,
        // whatever the length says.
        let announced = head.expectedContentLength
        let received = buffer.receivedBodyBytes
        return announced > 0 && announced < Int64(buffer.credit.limit)
            && head.value(forHTTPHeaderField: "Content-Encoding") == nil
            && head.value(forHTTPHeaderField: "Transfer-Encoding") == nil
            && received <= announced && announced - received <= Self.drainedRemainder
    }

    /// The most body bytes a stream left unread may still bring before its end, for the
    /// transfer to be read to its end instead of cancelled (`headEndsTheResponse`).
    static let drainedRemainder: Int64 = 64 << 10

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
