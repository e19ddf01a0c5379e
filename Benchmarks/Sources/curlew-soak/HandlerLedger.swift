import Foundation
import SessionCore
import Synchronization

/// Counts completion-handler calls per task (by the soak's own task number, given before the
/// task exists) and the outcomes by kind, so a handler called twice or never is named.
final class HandlerLedger: Sendable {
    private struct State {
        var calls: [UInt8]
        var firstCalls = 0
        var doubles: [Int] = []
        var outcomes: [String: Int] = [:]
    }
    private let state: Mutex<State>
    let capacity: Int

    /// A ledger for task numbers `0..<capacity`, allocated up front so that it does not grow
    /// during the run (it would show as RSS).
    init(capacity: Int) {
        self.capacity = capacity
        state = Mutex(State(calls: [UInt8](repeating: 0, count: capacity)))
    }

    /// Records one handler call for task `id` with the outcome's kind ("ok", "cancelled", ...).
    /// Returns true for the task's first call.
    @discardableResult
    func record(_ id: Int, outcome: String) -> Bool {
        state.withLock { state in
            state.outcomes[outcome, default: 0] += 1
            guard id >= 0 && id < state.calls.count else {
                state.doubles.append(id)
                return false
            }
            let before = state.calls[id]
            if before < 255 { state.calls[id] = before + 1 }
            if before == 0 {
                state.firstCalls += 1
                return true
            }
            if state.doubles.count < 100 { state.doubles.append(id) }
            return false
        }
    }

    /// Tasks whose handler ran at least once.
    var handled: Int { state.withLock { $0.firstCalls } }
    /// Every handler call, first or not.
    var calls: Int { state.withLock { $0.outcomes.values.reduce(0, +) } }
    /// Task numbers whose handler ran more than once (the first 100).
    var doubles: [Int] { state.withLock { $0.doubles } }
    var outcomes: [String: Int] { state.withLock { $0.outcomes } }

    /// Task numbers in `range` whose handler never ran (the first `limit`).
    func missing(in range: Range<Int>, limit: Int = 20) -> (count: Int, first: [Int]) {
        state.withLock { state in
            var count = 0
            var first: [Int] = []
            for id in range where state.calls[id] == 0 {
                count += 1
                if first.count < limit { first.append(id) }
            }
            return (count, first)
        }
    }

    /// Outcome kinds other than the allowed ones, with their counts.
    func unexpectedOutcomes(allowed: Set<String>) -> [String: Int] {
        outcomes.filter { !allowed.contains($0.key) }
    }

    /// "ok 1234, cancelled 56" in a stable order.
    var outcomeSummary: String {
        outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}

/// The kind of an error for the tallies: the `SessionError` case name, or the type.
func errorKind(_ error: any Error) -> String {
    if let error = error as? SessionError {
        switch error {
        case .cancelled: return "cancelled"
        case .sessionInvalidated: return "sessionInvalidated"
        case .resourceNotCached: return "resourceNotCached"
        default: return Mirror(reflecting: error).children.first?.label ?? "\(error)"
        }
    }
    return "\(type(of: error))"
}
