import Foundation

/// The slow workload's measurement for callback clients: wait (bounded) until every transfer
/// has received body bytes, then sample RSS.
enum SlowOpenProbe {
    /// Polls `receiving()` every 100 ms until it reaches `count` or `deadline` seconds pass;
    /// returns the last count.
    static func waitUntilReceiving(_ count: Int, deadline: Double, receiving: () -> Int) async -> Int {
        let limit = ProcessUsage.now().wallSeconds + deadline
        var current = receiving()
        while current < count && ProcessUsage.now().wallSeconds < limit {
            try? await Task.sleep(nanoseconds: 100_000_000)
            current = receiving()
        }
        return current
    }
}
