import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a transfer stands against its `TransferTimeouts` (driver thread only).
///
/// The idle clock measures the server's silence, so it runs only while the transfer has a
/// connection (or is making one) and nothing on Curlew's or the caller's side holds it back.
/// Each reason to stop it is a separate `Hold`, derived from the transfer's phase by
/// `TransferStateMachine`: one ending never restarts the clock while another still holds (a
/// task suspended while it waits for a connection slot stays stopped when the slot arrives).
struct TransferClock: Sendable {
    /// Why the idle clock is stopped; it runs while the set is empty.
    struct Hold: OptionSet, Sendable {
        let rawValue: UInt8
        /// The caller suspended the task.
        static let suspended = Hold(rawValue: 1 << 0)
        /// The consumer of a streamed body fell behind (backpressure).
        static let backpressure = Hold(rawValue: 1 << 1)
        /// No connection yet: waiting for a per-host slot, or inside libcurl for a connection
        /// under its limits. Lifted when libcurl starts resolving or connecting for the
        /// transfer, or hands it a connection.
        static let noConnection = Hold(rawValue: 1 << 2)
        /// Waiting for user code or a scheduled time: a hook, the challenge handler, the
        /// response hook, the retrier, or a retry's back-off.
        static let decision = Hold(rawValue: 1 << 3)
    }

    let timeouts: TransferTimeouts
    /// When the task started (the total clock's origin).
    let start: UInt64
    /// When a byte last moved, or the idle clock was last restarted.
    private(set) var lastActivity: UInt64
    /// What stops the idle clock now.
    private(set) var holds: Hold = []

    init(timeouts: TransferTimeouts, now: UInt64) {
        self.timeouts = timeouts
        start = now
        lastActivity = now
    }

    /// Whether the idle clock is stopped.
    var isIdleClockStopped: Bool { !holds.isEmpty }

    /// A byte moved (or the transfer restarted): the idle clock starts again.
    mutating func noteActivity(at now: UInt64) { lastActivity = now }

    /// Sets what stops the idle clock (`TransferStateMachine.holds`, recomputed after every
    /// event); when the last hold ends the clock restarts from `now`.
    mutating func setHolds(_ new: Hold, at now: UInt64) {
        if !holds.isEmpty && new.isEmpty { lastActivity = now }
        holds = new
    }

    /// The earliest moment one of the clocks can expire, if any.
    var nextDeadline: UInt64? {
        var deadline: UInt64?
        if let idle = timeouts.idle, holds.isEmpty { deadline = lastActivity &+ idle }
        if let total = timeouts.total { deadline = min(deadline ?? .max, start &+ total) }
        return deadline
    }

    /// Which clock ran out.
    enum Expiry: Equatable {
        /// The server was silent too long: this attempt failed (a retrier may try again).
        case idle(SessionError)
        /// The whole task ran out of time: final, retries included.
        case total(SessionError)

        var error: SessionError {
            switch self {
            case .idle(let error), .total(let error): return error
            }
        }
    }

    /// The clock that has run out at `now`, if any (the total clock first).
    func expiry(at now: UInt64) -> Expiry? {
        if let total = timeouts.total, now >= start &+ total {
            return .total(.timedOut("the task took longer than its resource timeout of \(TransferTimeouts.describe(total))"))
        }
        if let idle = timeouts.idle, holds.isEmpty, now >= lastActivity &+ idle {
            return .idle(.timedOut("no byte moved in either direction for \(TransferTimeouts.describe(idle))"))
        }
        return nil
    }
}
