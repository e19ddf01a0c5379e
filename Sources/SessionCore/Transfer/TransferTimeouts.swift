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
        // The request's own value unless it is the default, 0, negative or NaN (which turned the
        // idle timeout off); `.infinity` asks for no limit.
        let idleSeconds = requested != 60 && requested > 0 ? requested : timeoutIntervalForRequest
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
