import Synchronization

/// Backpressure for streamed bodies: the driver pauses the transfer while more than
/// `limit` bytes wait in user code, and the consumer resumes it once they drain.
final class StreamCredit: Sendable {
    private struct State { var outstanding = 0; var paused = false }
    // Shared by the driver (add, shouldPause) and the operation queue (consume): the Mutex
    // makes that safe.
    private let state = Mutex(State())
    /// Bytes that may wait in user code before the transfer pauses (at least 1).
    let limit: Int

    /// `limit`: 4 MiB for data handlers; a response byte stream's buffer is smaller.
    init(limit: Int = 4 << 20) { self.limit = max(1, limit) }

    /// What a chunk of `count` bytes is charged: at least 256, so that a flood of tiny
    /// chunks (a hostile server's 1-byte pieces) cannot hold a million `Data` values within
    /// the byte limit.
    static func cost(of count: Int) -> Int { max(count, 256) }

    func add(_ count: Int) { state.withLock { $0.outstanding += count } }

    /// True when the writer must pause; remembers that it did.
    func shouldPause() -> Bool {
        state.withLock { state in
            if state.outstanding >= limit { state.paused = true }
            return state.paused
        }
    }

    /// Records consumed bytes; true when a paused transfer should resume now.
    func consume(_ count: Int) -> Bool {
        state.withLock { state in
            state.outstanding -= count
            if state.paused && state.outstanding <= limit / 2 {
                state.paused = false
                return true
            }
            return false
        }
    }
}
