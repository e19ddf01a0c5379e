import Dispatch
import Foundation
import Serialization
import Synchronization

/// Reads a request body that may block — a caller's `InputStream`, or a multipart body with
/// one among its parts — on a queue of its own, into a bounded buffer that the driver thread
/// drains.
///
/// The driver thread never waits on it: when the buffer is empty, ``take(into:)`` answers
/// `.wait` and the transfer pauses (`CURL_READFUNC_PAUSE`); the next chunk the pump reads
/// calls `wake`, which asks the driver to resume the transfer. A throttled multipart body is
/// read without its packet pauses: the transfer's send-rate cap paces it (`BodyReader.sendRateCap`).
///
/// Lifetime: the pump holds the stream, never the task; `wake` must hold the task and the
/// engine weakly. ``cancel()`` (the body reader's deinit, a rewind) stops it; a read already
/// blocked in the caller's stream finishes first, then the stream is closed on the pump queue.
final class BodyPump: @unchecked Sendable {
    // @unchecked: `state` is guarded by its Mutex; `stream` and `isOpen` are touched only on
    // `queue`, a serial queue.

    /// What ``take(into:)`` found.
    enum Take: Equatable {
        /// This many bytes were copied.
        case bytes(Int)
        /// Nothing buffered yet: pause the transfer until `wake` is called.
        case wait
        /// The stream ended and every byte was taken.
        case end
        /// Reading the stream failed.
        case failed(SessionError)
    }

    private struct State {
        var chunks = ChunkQueue()
        var isFinished = false
        var failure: SessionError?
        /// A read is scheduled or running on the queue.
        var isPumping = false
        /// The driver answered `.wait` and expects a wake-up.
        var readerIsWaiting = false
        var isCancelled = false
    }

    private let state = Mutex(State())
    private let stream: InputStream
    private let queue: DispatchQueue
    /// The most bytes read per chunk.
    private let chunkSize = 64 << 10
    /// The pump stops reading ahead once this much is buffered.
    private let capacity: Int
    private let wake: @Sendable () -> Void
    private var isOpen = false

    /// Starts reading `stream` ahead. `wake` is called (from the pump queue) when data, the
    /// end or a failure arrives while the driver is waiting.
    init(stream: InputStream, capacity: Int = 256 << 10, wake: @escaping @Sendable () -> Void) {
        self.stream = stream
        self.capacity = max(capacity, chunkSize)
        self.wake = wake
        queue = DispatchQueue(label: "curlew.body-pump")
        state.withLock { $0.isPumping = true }
        queue.async { self.pump() }
    }

    /// Copies buffered bytes into `buffer` (driver thread).
    func take(into buffer: UnsafeMutableRawBufferPointer) -> Take {
        guard buffer.baseAddress != nil, buffer.count > 0 else { return .bytes(0) }
        var restart = false
        let result: Take = state.withLock { state in
            guard state.chunks.byteCount == 0 else {
                let copied = state.chunks.copy(into: buffer)
                if !state.isPumping, !state.isFinished, state.failure == nil, !state.isCancelled,
                    state.chunks.byteCount <= capacity / 2
                {
                    state.isPumping = true
                    restart = true
                }
                return .bytes(copied)
            }
            if let failure = state.failure { return .failed(failure) }
            if state.isFinished { return .end }
            state.readerIsWaiting = true
            if !state.isPumping, !state.isCancelled {
                state.isPumping = true
                restart = true
            }
            return .wait
        }
        if restart { queue.async { self.pump() } }
        return result
    }

    /// Whether bytes read from the stream wait in the buffer (driver thread: after the body's
    /// declared length was sent, they are a surplus the request went without).
    var holdsUnsentBytes: Bool { state.withLock { $0.chunks.byteCount > 0 } }

    /// Stops reading and drops what is buffered; the stream is closed on the pump queue.
    func cancel() {
        state.withLock { state in
            state.isCancelled = true
            state.chunks.removeAll()
        }
        queue.async { self.closeStream() }
    }

    // MARK: - The pump queue

    /// Reads one chunk, then schedules the next unless the buffer is full or the body ended.
    private func pump() {
        if state.withLock({ $0.isCancelled }) {
            closeStream()
            return
        }
        if !isOpen {
            stream.open()
            isOpen = true
        }
        var chunk = Data(count: chunkSize)
        let count = chunk.withUnsafeMutableBytes { bytes -> Int in
            guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return -1 }
            if let multipart = stream as? MultipartBodyStream {
                return multipart.readPacket(base, maxLength: bytes.count, ignoringPacketSize: true)
            }
            return stream.read(base, maxLength: bytes.count)
        }
        var failure: SessionError?
        if count < 0 {
            failure = .bodyStreamFailed(stream.streamError.map { "\($0)" } ?? "the stream reported an error")
        } else if count < chunk.count {
            chunk.removeSubrange(count...)
        }
        var shouldWake = false
        let continues: Bool = state.withLock { state in
            guard !state.isCancelled else { return false }
            if let failure {
                state.failure = failure
            } else if count == 0 {
                state.isFinished = true
            } else {
                state.chunks.append(chunk)
            }
            if state.readerIsWaiting {
                state.readerIsWaiting = false
                shouldWake = true
            }
            let continues = state.failure == nil && !state.isFinished && state.chunks.byteCount < capacity
            if !continues { state.isPumping = false }
            return continues
        }
        if failure != nil || count == 0 { closeStream() }
        if shouldWake { wake() }
        if continues { queue.async { self.pump() } }
    }

    private func closeStream() {
        guard isOpen else { return }
        isOpen = false
        stream.close()
    }
}
