import Foundation
import Synchronization

/// A request body produced by a caller's `AsyncSequence` of `Data`
/// (`URLSessionManager.upload(for:from:)`), read by the driver thread through a bounded
/// buffer.
///
/// The sequence is iterated in a Swift task of its own, started at the first read: the
/// driver never runs the caller's code or waits on it. When the buffer is empty the read
/// answers `.wait` and the transfer pauses (`CURL_READFUNC_PAUSE`) until the next chunk calls
/// the wake closure; when it is full the producer waits. The sequence is iterated once, so
/// the body can be sent again (a dead reused connection, a retry) only while nothing of it
/// was read.
final class AsyncBodyFeed: Sendable {
    private struct State {
        /// Chunks not yet taken.
        var chunks = ChunkQueue()
        var isFinished = false
        var failure: SessionError?
        var readerIsWaiting = false
        var producerWaiter: DriverResumedWaiter<Void, Never>?
        var producer: Task<Void, Never>?
        var producerStarted = false
        var isCancelled = false
        /// Some byte was handed to curl: the body can no longer start over.
        var hasDelivered: Bool { deliveredBytes > 0 }
        /// Bytes handed to curl.
        var deliveredBytes: Int64 = 0
        var wake: (@Sendable () -> Void)?
        /// The declared length (copied here for `finishTransfer`).
        var length: Int64?
    }

    /// The declared length; nil sends the body with chunked transfer coding.
    let length: Int64?
    /// The producer stops reading ahead once this much is buffered.
    let capacity: Int
    private let produce: @Sendable (AsyncBodyFeed) async -> Void
    private let state = Mutex(State())

    /// `produce` iterates the caller's sequence into ``put(_:)`` and ends with ``finish(_:)``.
    init(length: Int64?, capacity: Int = 256 << 10, produce: @escaping @Sendable (AsyncBodyFeed) async -> Void) {
        self.length = length
        self.capacity = max(1, capacity)
        self.produce = produce
        state.withLock { $0.length = length }
    }

    /// The producer for a caller's sequence: each chunk into ``put(_:)``, then ``finish(_:)``.
    static func producing<Body: AsyncSequence & Sendable>(_ body: Body) -> @Sendable (AsyncBodyFeed) async -> Void
    where Body.Element == Data {
        { feed in
            // Cancelled before it began (the upload ended first): not one step of the
            // caller's sequence is taken.
            if feed.isCancelled { return }
            do {
                for try await chunk in body {
                    guard await feed.put(chunk) else { return }
                }
                feed.finish(nil)
            } catch {
                feed.finish(error)
            }
        }
    }

    // MARK: - Producer side

    /// Buffers a chunk, waiting while the buffer is full; false once the transfer ended and
    /// wants nothing more.
    func put(_ chunk: Data) async -> Bool {
        if chunk.isEmpty { return !state.withLock { $0.isCancelled } }
        let (accepted, wake, mustWait) = state.withLock { state -> (Bool, (@Sendable () -> Void)?, Bool) in
            guard !state.isCancelled, !state.isFinished else { return (false, nil, false) }
            state.chunks.append(chunk)
            var wake: (@Sendable () -> Void)?
            if state.readerIsWaiting {
                state.readerIsWaiting = false
                wake = state.wake
            }
            return (true, wake, state.chunks.byteCount >= capacity)
        }
        wake?()
        guard accepted else { return false }
        if mustWait {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    guard !state.isCancelled, state.chunks.byteCount >= capacity else { return true }
                    state.producerWaiter = DriverResumedWaiter(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
        return !state.withLock { $0.isCancelled }
    }

    /// The sequence ended (`error` nil) or threw.
    func finish(_ error: (any Error)?) {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.isFinished, state.failure == nil else { return nil }
            if let error {
                state.failure = .bodyStreamFailed("the body sequence threw: \(error)")
            } else {
                state.isFinished = true
            }
            guard state.readerIsWaiting else { return nil }
            state.readerIsWaiting = false
            return state.wake
        }
        wake?()
    }

    // MARK: - Driver side

    /// The closure that resumes a paused read (set by each attempt's body reader).
    func attach(wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
    }

    /// Whether the transfer ended and wants nothing more.
    var isCancelled: Bool { state.withLock { $0.isCancelled } }

    /// Called when the transfer completed: the error to report when the sequence yielded
    /// more than its declared length (libcurl stops reading at the length, so the surplus
    /// sits in the buffer), else nil. Then stops the producer.
    ///
    /// Only a body sent whole has a surplus: a server that answered before reading it all (a
    /// 413 at the head) stopped the upload half way, and what the producer had read ahead is
    /// the unsent rest, not a surplus; the call's result is that answer. A surplus the
    /// sequence yields only after the response arrived is not seen (waiting for it could wait
    /// forever on a sequence that never ends).
    func finishTransfer() -> SessionError? {
        let surplus = state.withLock { state in
            guard let length = state.length else { return false }
            return state.deliveredBytes == length && state.chunks.byteCount > 0
        }
        cancel()
        return surplus ? .bodyStreamFailed("the body sequence is longer than its declared length; the surplus was not sent") : nil
    }

    /// Whether the driver has taken the whole body: the sequence ended and nothing of it waits
    /// (or its declared length went out). Until then the transfer does not end by itself.
    var isDrained: Bool {
        state.withLock { state in
            if let length = state.length, state.deliveredBytes >= length { return true }
            return state.isFinished && state.chunks.byteCount == 0
        }
    }

    /// Whether the body can still be sent from its start.
    var isRewindable: Bool { !state.withLock { $0.hasDelivered } }

    /// Copies buffered bytes into `buffer` (driver thread).
    func take(into buffer: UnsafeMutableRawBufferPointer) -> BodyPump.Take {
        guard buffer.baseAddress != nil, buffer.count > 0 else { return .bytes(0) }
        var startProducer = false
        var resumeProducer: DriverResumedWaiter<Void, Never>?
        let result: BodyPump.Take = state.withLock { state in
            if state.chunks.byteCount > 0 {
                let copied = state.chunks.copy(into: buffer)
                state.deliveredBytes += Int64(copied)
                if state.chunks.byteCount <= capacity / 2, let waiter = state.producerWaiter {
                    state.producerWaiter = nil
                    resumeProducer = waiter
                }
                return .bytes(copied)
            }
            if let failure = state.failure { return .failed(failure) }
            if state.isFinished { return .end }
            if state.isCancelled { return .failed(.cancelled) }
            state.readerIsWaiting = true
            if !state.producerStarted {
                state.producerStarted = true
                startProducer = true
            }
            return .wait
        }
        resumeProducer?.resumeFromDriver(with: .success(()))
        if startProducer { start() }
        return result
    }

    /// Stops the producer and drops what is buffered (the task completed).
    func cancel() {
        let (producer, waiter) = state.withLock { state -> (Task<Void, Never>?, DriverResumedWaiter<Void, Never>?) in
            state.isCancelled = true
            state.chunks.removeAll()
            state.wake = nil
            defer { state.producerWaiter = nil }
            return (state.producer, state.producerWaiter)
        }
        waiter?.resumeFromDriver(with: .success(()))
        producer?.cancel()
    }

    private func start() {
        let produce = self.produce
        let task = Task { [self] in await produce(self) }
        let cancelled = state.withLock { state -> Bool in
            state.producer = task
            return state.isCancelled
        }
        if cancelled { task.cancel() }
    }
}
