import Synchronization

/// Keeps `concurrency` completion-handler requests in flight until `total` have finished:
/// each completion starts the next one, as a completion-handler user would write it.
final class RequestLoop: Sendable {
    private struct State {
        var started = 0
        var finished = 0
        var outcome = Outcome()
        var continuation: CheckedContinuation<Outcome, Never>?
    }

    private let state = Mutex(State())
    private let total: Int
    private let start: @Sendable (RequestLoop) -> Void

    /// - Parameter start: starts one request and arranges for `finished` to be called once.
    init(total: Int, start: @escaping @Sendable (RequestLoop) -> Void) {
        self.total = total
        self.start = start
    }

    /// Starts `concurrency` requests and returns once `total` have finished. With
    /// `concurrency` 0 it only waits for requests started elsewhere to report.
    func run(concurrency: Int) async -> Outcome {
        await withCheckedContinuation { continuation in
            // Already over (nothing to run, or every request finished before this call)?
            let over = state.withLock { state -> Outcome? in
                if state.finished >= total { return state.outcome }
                state.continuation = continuation
                return nil
            }
            if let over {
                continuation.resume(returning: over)
                return
            }
            for _ in 0..<min(concurrency, total) { startNext() }
        }
    }

    /// Records one finished request (from any thread) and starts the next, if any.
    func finished(ok: Bool, bytes: Int, error: @autoclosure () -> String) {
        let message = ok ? nil : error()
        let done = state.withLock { state -> (CheckedContinuation<Outcome, Never>, Outcome)? in
            state.finished += 1
            if ok {
                state.outcome.completed += 1
                state.outcome.bytes += Int64(bytes)
            } else {
                state.outcome.fail(message ?? "")
            }
            guard state.finished == total, let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (continuation, state.outcome)
        }
        if let (continuation, outcome) = done {
            continuation.resume(returning: outcome)
        } else {
            startNext()
        }
    }

    /// How many requests have finished so far, and their outcome.
    var progress: (finished: Int, outcome: Outcome) {
        state.withLock { ($0.finished, $0.outcome) }
    }

    private func startNext() {
        let go = state.withLock { state -> Bool in
            guard state.started < total else { return false }
            state.started += 1
            return true
        }
        if go { start(self) }
    }
}
