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
        /// The request body's producer (the caller's stream or sequence) has nothing ready
        /// and the server has not answered yet.
        static let bodyProducer = Hold(rawValue: 1 << 4)
    }

    let timeouts: TransferTimeouts
    /// When the task started (the total clock's origin).
    let start: UInt64
    /// When a byte last moved, or the idle clock was last restarted.
    private(set) var lastActivity: UInt64
    /// What stops the idle clock now.
    private(set) var holds: Hold = []
    /// The silence after which libcurl is first made to look at the transfer again
    /// (`nextProbe`); nil: never.
    let firstProbeDelay: UInt64?
    /// The last activity or, after a probe, the probe.
    private(set) var probeAnchor: UInt64
    /// Probes since a byte last moved: each doubles the wait for the next.
    private(set) var probesSinceActivity: UInt8 = 0

    /// libcurl's rate caps of the current exchange (nil: uncapped): while libcurl may be
    /// waiting for one, the silence is the cap's, not the server's.
    private(set) var receivePace: RatePace?
    private(set) var sendPace: RatePace?
    /// Until when the caps may hold the transfer back (0: uncapped): the idle clock counts
    /// from here when it is later than the last activity. Each pace's bound only grows
    /// within an exchange, so the later of the two is the bound of the whole transfer.
    var pacedUntil: UInt64 {
        max(receivePace?.heldUntil ?? 0, sendPace?.heldUntil ?? 0)
    }

    /// A wait between probes is at most `firstProbeDelay` times this (64 s for 1 s).
    static let longestProbeFactor: UInt64 = 64

    /// `totalStart`: the total clock's origin when earlier than `now` (the task's adaptation).
    init(timeouts: TransferTimeouts, now: UInt64, totalStart: UInt64? = nil, firstProbeDelay: UInt64? = nil) {
        self.timeouts = timeouts
        self.firstProbeDelay = firstProbeDelay
        start = min(totalStart ?? now, now)
        lastActivity = now
        probeAnchor = now
    }

    /// Whether the idle clock is stopped.
    var isIdleClockStopped: Bool { !holds.isEmpty }

    /// A byte moved (or the transfer restarted): the idle clock starts again.
    mutating func noteActivity(at now: UInt64) {
        lastActivity = now
        probeAnchor = now
        probesSinceActivity = 0
    }

    /// The caps of an exchange that starts at `now` (bytes per second; nil: none).
    mutating func setRateCaps(receive: Int64?, send: Int64?, at now: UInt64) {
        receivePace = receive.map { RatePace(bytesPerSecond: $0, now: now) }
        sendPace = send.map { RatePace(bytesPerSecond: $0, now: now) }
    }

    /// Whether a cap applies to the current exchange.
    var isRateCapped: Bool { receivePace != nil || sendPace != nil }

    /// libcurl's byte counts at `now` (its progress callback), which its caps are measured on.
    mutating func observeCounts(uploaded: Int64, downloaded: Int64, at now: UInt64) {
        receivePace?.observe(downloaded, at: now)
        sendPace?.observe(uploaded, at: now)
    }

    /// When `idle` of silence has passed: counted from the last activity, or from the end of
    /// a cap's wait when that is later (saturating: a cap's bound may be far off).
    private func idleDeadline(_ idle: UInt64) -> UInt64 {
        let (deadline, overflow) = max(lastActivity, pacedUntil).addingReportingOverflow(idle)
        return overflow ? .max : deadline
    }

    /// Sets what stops the idle clock (`TransferStateMachine.holds`, recomputed after every
    /// event); when the last hold ends the clock restarts from `now`.
    mutating func setHolds(_ new: Hold, at now: UInt64) {
        if !holds.isEmpty && new.isEmpty { noteActivity(at: now) }
        holds = new
    }

    /// When libcurl should next be made to look at the transfer although nothing seems to
    /// have arrived (`DriverLoop.probe`): libcurl before 8.1 can leave a stream's last frames
    /// in its HTTP/2 connection buffer with no transfer marked to read them, and waits for
    /// the socket, which has nothing more to say. Silence of `firstProbeDelay` after the last
    /// byte, then twice as long after each probe that found nothing (up to
    /// `longestProbeFactor` times), while the idle clock runs; nil when probing is off or a
    /// hold stops the clock (a transfer Curlew or the caller paused is not silent, it waits).
    /// Waiting for the request body's producer is the exception: its receive side is not
    /// paused, and an early answer stranded there would otherwise wait for the producer.
    var nextProbe: UInt64? {
        guard let first = firstProbeDelay, holds.subtracting(.bodyProducer).isEmpty else { return nil }
        let factor = min(UInt64(1) << UInt64(min(probesSinceActivity, 62)), Self.longestProbeFactor)
        let (wait, overflow) = first.multipliedReportingOverflow(by: factor)
        return overflow ? nil : probeAnchor &+ wait
    }

    /// libcurl was made to look at the transfer at `now`; the next probe waits longer.
    mutating func probed(at now: UInt64) {
        probeAnchor = now
        if probesSinceActivity < .max { probesSinceActivity += 1 }
    }

    /// The earliest moment the driver has something to do for this clock: a deadline or a
    /// probe.
    var nextWake: UInt64? {
        guard let probe = nextProbe else { return nextDeadline }
        return min(probe, nextDeadline ?? .max)
    }

    /// The earliest moment one of the clocks can expire, if any.
    var nextDeadline: UInt64? {
        var deadline: UInt64?
        if let idle = timeouts.idle, holds.isEmpty { deadline = idleDeadline(idle) }
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
        if let idle = timeouts.idle, holds.isEmpty, now >= idleDeadline(idle) {
            return .idle(.timedOut("no byte moved in either direction for \(TransferTimeouts.describe(idle))"))
        }
        return nil
    }
}
