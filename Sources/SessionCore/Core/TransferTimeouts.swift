import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A task's two clocks, in nanoseconds of `DispatchTime` uptime, enforced by the driver loop
/// itself rather than by curl's low-speed check (which averages over a window and fired
/// seconds late).
///
/// - idle: the time since a byte last moved in either direction (connecting included);
///   the clock stops while the caller has suspended the task or its consumer holds it paused.
/// - total: the whole task, redirects, challenges and uploads included.
///
/// A value that is not a positive, finite, representable number of seconds — `0`, negative,
/// `.infinity`, `.nan`, or more than a century — means "no limit": it never traps.
struct TransferTimeouts: Sendable, Equatable {
    /// Silence allowed before `.timedOut`; nil: no idle limit.
    let idle: UInt64?
    /// Time the whole task may take; nil: no limit.
    let total: UInt64?

    /// Anything longer than this is treated as no limit (and stays far from overflow).
    static let longest: TimeInterval = 100 * 365 * 24 * 3600

    init(idle: UInt64?, total: UInt64?) {
        self.idle = idle
        self.total = total
    }

    /// The timeouts of `request` under `configuration`: the request's own `timeoutInterval`
    /// wins when the caller changed it from `URLRequest`'s 60-second default.
    init(request: URLRequest?, configuration: SessionConfiguration) {
        self.init(
            request: request, timeoutIntervalForRequest: configuration.timeoutIntervalForRequest,
            timeoutIntervalForResource: configuration.timeoutIntervalForResource)
    }

    /// The same from the two settings alone.
    init(request: URLRequest?, timeoutIntervalForRequest: TimeInterval, timeoutIntervalForResource: TimeInterval) {
        self.init(
            requested: request?.timeoutInterval ?? 60, timeoutIntervalForRequest: timeoutIntervalForRequest,
            timeoutIntervalForResource: timeoutIntervalForResource)
    }

    /// The same from the request's `timeoutInterval` (`requested`, read when it was prepared)
    /// and the two settings: the driver's path, with no copy of the configuration.
    init(requested: TimeInterval, timeoutIntervalForRequest: TimeInterval, timeoutIntervalForResource: TimeInterval) {
        let idleSeconds = requested != 60 && !(requested <= 0) ? requested : timeoutIntervalForRequest
        self.init(idle: Self.nanoseconds(idleSeconds), total: Self.nanoseconds(timeoutIntervalForResource))
    }

    /// `seconds` in nanoseconds, or nil when it means "no limit".
    static func nanoseconds(_ seconds: TimeInterval) -> UInt64? {
        guard seconds.isFinite, seconds > 0, seconds <= longest else { return nil }
        return UInt64((seconds * 1e9).rounded(.up))
    }

    /// A readable duration for error messages ("2 s", "0.25 s").
    static func describe(_ nanoseconds: UInt64) -> String {
        let seconds = Double(nanoseconds) / 1e9
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }
}

/// Where a transfer stands against its `TransferTimeouts` (driver thread only).
///
/// The idle clock measures the server's silence, so it runs only while the transfer has a
/// connection (or is making one) and nothing on Curlew's or the caller's side holds it back.
/// Each reason to stop it is a separate `Hold`: one ending never restarts the clock while
/// another still holds (a task suspended while it waits for a connection slot stays stopped
/// when the slot arrives).
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

    /// Stops the idle clock for `reason` (it may already be stopped for another).
    mutating func hold(_ reason: Hold) { holds.insert(reason) }

    /// Ends `reason`'s hold; when no other hold is left the clock restarts from `now`.
    mutating func release(_ reason: Hold, at now: UInt64) {
        guard holds.contains(reason) else { return }
        holds.remove(reason)
        if holds.isEmpty { lastActivity = now }
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
