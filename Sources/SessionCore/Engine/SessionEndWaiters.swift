import Synchronization

/// The suspended waits of long-lived callers that end with the manager's session: a
/// server-sent event stream between its connections (up to a day, at a server's `retry:`),
/// which an invalidation or a reset must reach at once rather than when its sleep is over
/// (and, after a reset, not carry the old session's event ID into the new one).
///
/// Each wait is an entry from `makeID()` until it is resumed. Its cancellation may run before
/// the continuation is stored (`pending` becomes `cancelled`, and storing resumes it at once)
/// or after (the stored continuation is taken and resumed); a wait resumed by the session's
/// end is gone from the table, so a late cancellation finds nothing to do. Guarded by
/// `SessionEngine.sessionEndWaiters`' lock.
struct SessionEndWaiters {
    enum Entry {
        case pending
        case cancelled
        case waiting(CheckedContinuation<Void, Never>)
    }

    private var nextID: UInt64 = 0
    private var entries: [UInt64: Entry] = [:]

    /// A new wait's entry.
    mutating func makeID() -> UInt64 {
        nextID += 1
        entries[nextID] = .pending
        return nextID
    }

    /// Stores `continuation` for `id`; false when the wait must end now instead (cancelled
    /// already, or `sessionEnded`), its entry removed.
    mutating func store(_ continuation: CheckedContinuation<Void, Never>, for id: UInt64, sessionEnded: Bool) -> Bool {
        guard case .pending? = entries[id], !sessionEnded else {
            entries[id] = nil
            return false
        }
        entries[id] = .waiting(continuation)
        return true
    }

    /// The wait's cancellation: its continuation when one was stored (to resume), else nil.
    mutating func cancel(_ id: UInt64) -> CheckedContinuation<Void, Never>? {
        switch entries[id] {
        case .waiting(let continuation)?:
            entries[id] = nil
            return continuation
        case .pending?:
            entries[id] = .cancelled
            return nil
        case .cancelled?, nil:
            return nil
        }
    }

    /// The session ended: every stored continuation, taken out to be resumed. Pending waits
    /// see the new generation when they store theirs.
    mutating func takeAll() -> [CheckedContinuation<Void, Never>] {
        var taken: [CheckedContinuation<Void, Never>] = []
        for (id, entry) in entries {
            if case .waiting(let continuation) = entry {
                taken.append(continuation)
                entries[id] = nil
            }
        }
        return taken
    }

    /// The number of waits not yet over (for the tests: none may be left behind).
    var count: Int { entries.count }
}

extension SessionEngine {
    /// The sessions ended so far (`sessionGeneration`).
    var currentSessionGeneration: Int { sessionGeneration.load(ordering: .relaxed) }

    /// Returns when the session the caller saw as `generation` (`sessionGeneration`) ends —
    /// an invalidation or a reset begins —, at once if it already has, or when the calling
    /// task is cancelled.
    func waitForSessionEnd(after generation: Int) async {
        let id = sessionEndWaiters.withLock { $0.makeID() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let stored = sessionEndWaiters.withLock { waiters in
                    waiters.store(
                        continuation, for: id,
                        sessionEnded: sessionGeneration.load(ordering: .relaxed) != generation)
                }
                if !stored { continuation.resume() }
            }
        } onCancel: {
            sessionEndWaiters.withLock { $0.cancel(id) }?.resume()
        }
    }

    /// The session ends (an invalidation or a reset begins): the next generation, and every
    /// wait for it resumed.
    func sessionDidEnd() {
        let continuations = sessionEndWaiters.withLock { waiters in
            // Under the lock: a wait stores its continuation, or sees the new generation.
            sessionGeneration.add(1, ordering: .relaxed)
            return waiters.takeAll()
        }
        for continuation in continuations { continuation.resume() }
    }
}
