/// How long libcurl may be holding one direction of a capped transfer back on purpose
/// (`CURLOPT_MAX_RECV_SPEED_LARGE`, `CURLOPT_MAX_SEND_SPEED_LARGE`): that wait is the cap's,
/// not the server's silence, and the idle clock must not count it (`TransferClock`).
///
/// libcurl paces in bursts: a pass reads (or writes) as much as the socket gives, up to about
/// a hundred receive buffers, and then waits until the bytes counted since its last stamp fit
/// the cap (`Curl_pgrsLimitWaitTime`). A capped download of 16 KiB buffers takes ~1.4 MB at
/// once and then waits 1.4 MB / cap: 70 s at 20 KB/s, past the default 60 s timeout, so a
/// throttled download failed with `.timedOut` while its server was sending all along.
///
/// libcurl's stamp (when its window began, and its count then) is not readable, so this keeps
/// a bound that is never earlier than libcurl's wait ends: for any past moment `t` with count
/// `d(t)`, a wait measured from `t` ends at `t − d(t)/cap + count/cap`. The largest
/// `t − d(t)/cap` seen is kept (`mostBehind`); it is sampled when the count changes, with the
/// count from before the change, which overestimates the moment just before a burst — the safe
/// side. A transfer slower than its cap (a slow server) gets no wait at all: its `mostBehind`
/// keeps up with time and the bound is already past.
struct RatePace: Sendable, Equatable {
    /// The cap, in bytes per second (at least 1: `TransferRate.cap`).
    let bytesPerSecond: Int64
    /// libcurl's count of this direction's bytes at the last change.
    private(set) var count: Int64 = 0
    /// The largest `t − d(t)/cap` seen, in nanoseconds of uptime (a Double: a cap of a few
    /// bytes per second and a large count take it far from `t`).
    private(set) var mostBehind: Double

    /// A pace for a transfer that starts at `now` with nothing counted.
    init(bytesPerSecond: Int64, now: UInt64) {
        self.bytesPerSecond = max(1, bytesPerSecond)
        mostBehind = Double(now)
    }

    /// libcurl reports `newCount` bytes at `now` (its progress callback).
    mutating func observe(_ newCount: Int64, at now: UInt64) {
        guard newCount != count else { return }
        if newCount > count {
            mostBehind = max(mostBehind, Double(now) - nanoseconds(for: count))
        } else {
            mostBehind = Double(now)  // libcurl started counting again (a new exchange)
        }
        count = newCount
    }

    /// The moment (uptime nanoseconds) libcurl's wait for this direction has surely ended.
    var heldUntil: UInt64 {
        let end = mostBehind + nanoseconds(for: count)
        guard end > 0 else { return 0 }
        return end >= Double(UInt64.max) ? .max : UInt64(end)
    }

    /// How long `bytes` take at the cap.
    private func nanoseconds(for bytes: Int64) -> Double {
        Double(bytes) / Double(bytesPerSecond) * 1e9
    }
}
