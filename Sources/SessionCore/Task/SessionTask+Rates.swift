import Foundation
import Synchronization

extension SessionTask {
    /// The most response bytes per second this task receives, in addition to the manager's
    /// `SessionConfiguration.maximumReceiveRate`: the lower of the two applies (a task can
    /// narrow the manager's cap, not widen it). Paced by libcurl
    /// (`CURLOPT_MAX_RECV_SPEED_LARGE`), which stops reading the socket while the transfer is
    /// ahead, so the server is slowed by TCP flow control rather than the body buffered.
    ///
    /// Set it before `resume()`: it is read when each exchange starts (the first request, a
    /// redirect, a retry), not in the middle of one. `0` (the default), a negative value,
    /// `.infinity` or NaN: no cap of the task's own.
    public var maximumReceiveRate: Double {
        get { protected.withLock { $0.maximumReceiveRate } }
        set { protected.withLock { $0.maximumReceiveRate = newValue } }
    }

    /// The most request body bytes per second this task sends, in addition to the manager's
    /// `SessionConfiguration.maximumSendRate` and a multipart body's
    /// `throttleBandwidth(withPacketSize:delay:)`: the lowest applies
    /// (`CURLOPT_MAX_SEND_SPEED_LARGE`). Read when each exchange starts, like
    /// ``maximumReceiveRate``. `0` (the default), negative, `.infinity` or NaN: none.
    public var maximumSendRate: Double {
        get { protected.withLock { $0.maximumSendRate } }
        set { protected.withLock { $0.maximumSendRate = newValue } }
    }
}

/// Rate caps in bytes per second, as libcurl takes them.
enum TransferRate {
    /// The lowest of `rates` that is a cap (finite and positive), in whole bytes per second
    /// (at least 1); nil when none is.
    static func cap(_ rates: Double?...) -> Int64? {
        var lowest: Double?
        for case let rate? in rates where rate.isFinite && rate > 0 {
            lowest = min(lowest ?? rate, rate)
        }
        guard let lowest else { return nil }
        return lowest >= 9.0e18 ? nil : max(1, Int64(lowest.rounded()))
    }
}
