import Foundation
import Serialization
import Synchronization

/// The hand-over between a transfer and the one consumer of its streamed body
/// (``ResponseBytes``): the driver thread puts the response head and body chunks in, the
/// consuming Swift task takes them out.
///
/// Backpressure: the driver pauses the transfer (`CURL_WRITEFUNC_PAUSE`) while `credit.limit`
/// bytes or more wait here (`TaskDelegate.didReceiveBody`); taking chunks out resumes it
/// through the driver's `.resumeReading`. The driver side only appends under the lock and
/// resumes a continuation: no user code runs on the driver thread (a consumer under a task
/// executor preference is resumed from a global queue: `DriverResumedWaiter`).
///
/// Lifetime: the task holds this buffer (through its options), the buffer holds the task
/// weakly; the consumer (``ResponseStreamConsumer``) holds both.
final class ResponseStreamBuffer: Sendable {
    /// What the consumer's wait for the next chunk ended with.
    private enum End {
        case finished
        case failed(any Error)
    }

    private struct State {
        var head: HTTPResponseHead?
        var headWaiter: DriverResumedWaiter<HTTPResponseHead, any Error>?
        /// Chunks not yet taken.
        var chunks = ChunkQueue()
        var chunkWaiter: DriverResumedWaiter<Data?, any Error>?
        /// Set once the transfer completed.
        var end: End?
        /// The consumer left: chunks are dropped as they come (the transfer is being cancelled).
        var isAbandoned = false
        /// Every body byte handed to this buffer (taken or not).
        var receivedBodyBytes: Int64 = 0
        weak var task: SessionTask?
    }

    let credit: StreamCredit
    private let state = Mutex(State())

    /// `limit`: the bytes that may wait here before the transfer pauses.
    init(limit: Int) {
        credit = StreamCredit(limit: limit)
    }

    /// The task whose transfer fills this buffer (set once, before it starts).
    func attach(_ task: SessionTask) {
        state.withLock { $0.task = task }
    }

    // MARK: - Driver side

    /// The delivered response's head arrived (driver thread).
    func receive(head: HTTPResponseHead) {
        let waiter = state.withLock { state -> DriverResumedWaiter<HTTPResponseHead, any Error>? in
            // One head per stream: an attempt whose head went to the consumer is never retried
            // (`TaskDelegate.hasStreamedBody`), so a second one cannot arrive.
            guard state.head == nil else { return nil }
            state.head = head
            defer { state.headWaiter = nil }
            return state.headWaiter
        }
        waiter?.resumeFromDriver(with: .success(head))
    }

    /// A body chunk (driver thread); the driver already counted it in `credit`.
    func append(_ chunk: Data) {
        let (waiter, dropped) = state.withLock { state -> (DriverResumedWaiter<Data?, any Error>?, Bool) in
            state.receivedBodyBytes += Int64(chunk.count)
            if state.isAbandoned { return (nil, true) }
            if let waiter = state.chunkWaiter {
                state.chunkWaiter = nil
                return (waiter, false)
            }
            state.chunks.append(chunk)
            return (nil, false)
        }
        if dropped {
            // Nobody will take it: its credit goes back at once (`abandon`).
            resumeIfCaughtUp(after: chunk.count)
            return
        }
        guard let waiter else { return }
        // Handed straight to a waiting consumer: consumed now. The transfer is running (it
        // just delivered), so there is nothing to resume.
        _ = credit.consume(StreamCredit.cost(of: chunk.count))
        waiter.resumeFromDriver(with: .success(chunk))
    }

    /// The transfer completed (completion queue): a waiting consumer gets the end, after any
    /// chunks still buffered.
    func finish(error: (any Error)?) {
        let (headWaiter, chunkWaiter) = state.withLock {
            state -> (DriverResumedWaiter<HTTPResponseHead, any Error>?, DriverResumedWaiter<Data?, any Error>?) in
            guard state.end == nil else { return (nil, nil) }
            state.end = error.map { .failed($0) } ?? .finished
            let headWaiter = state.headWaiter
            state.headWaiter = nil
            let chunkWaiter = state.chunkWaiter
            state.chunkWaiter = nil
            return (headWaiter, chunkWaiter)
        }
        if let headWaiter {
            headWaiter.continuation.resume(throwing: error ?? SessionError.badServerResponse("the transfer ended without a response"))
        }
        if let chunkWaiter {
            if let error { chunkWaiter.continuation.resume(throwing: error) } else { chunkWaiter.continuation.resume(returning: nil) }
        }
    }

    // MARK: - Consumer side

    /// The head handed to the consumer, once it arrived.
    var receivedHead: HTTPResponseHead? { state.withLock { $0.head } }

    /// Whether the transfer completed.
    var isFinished: Bool { state.withLock { $0.end != nil } }

    /// The body bytes received so far, taken by the consumer or not.
    var receivedBodyBytes: Int64 { state.withLock { $0.receivedBodyBytes } }

    /// Waits for the response head, or throws the transfer's error.
    func awaitHead() async throws -> HTTPResponseHead {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<HTTPResponseHead, any Error>? in
                if let head = state.head { return .success(head) }
                switch state.end {
                case .failed(let error): return .failure(error)
                case .finished: return .failure(SessionError.badServerResponse("the transfer ended without a response"))
                case nil:
                    state.headWaiter = DriverResumedWaiter(continuation)
                    return nil
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// The next chunk; nil at the end of the body; throws the transfer's error once the
    /// chunks received before it were taken.
    func next() async throws -> Data? {
        let chunk: Data? = try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<Data?, any Error>? in
                if let chunk = state.chunks.popChunk() { return .success(chunk) }
                switch state.end {
                case .finished: return .success(nil)
                case .failed(let error):
                    state.end = .finished  // thrown once; later calls end quietly
                    return .failure(error)
                case nil:
                    state.chunkWaiter = DriverResumedWaiter(continuation)
                    return nil
                }
            }
            if let ready {
                if case .success(let chunk?) = ready { resumeIfCaughtUp(after: chunk.count) }
                continuation.resume(with: ready)
            }
        }
        return chunk
    }

    /// The consumer will take nothing more: drop what is buffered, and give its credit back,
    /// as for every chunk that comes after: a transfer left to end by itself (a small answer
    /// nearly in, `ResponseStreamConsumer.stop`) never pauses for a consumer that is gone —
    /// paused, it held its connection until the resource timeout (the idle clock stops for a
    /// consumer behind).
    func abandon() {
        let dropped = state.withLock { state -> [Int] in
            state.isAbandoned = true
            var sizes: [Int] = []
            while let chunk = state.chunks.popChunk() { sizes.append(chunk.count) }
            return sizes
        }
        for size in dropped { resumeIfCaughtUp(after: size) }
    }

    /// Counts a taken chunk; resumes the paused transfer once enough was taken.
    private func resumeIfCaughtUp(after count: Int) {
        guard credit.consume(StreamCredit.cost(of: count)), let task = state.withLock({ $0.task }) else { return }
        _ = task.engine.submit(.resumeReading(task))
    }
}
