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

    /// After the open transfers were sampled and cancelled: waits (bounded: a client that never
    /// reports a cancelled task must not hang the suite) until each reported, and builds the
    /// outcome with the RSS sample.
    static func conclude(
        spec: WorkloadSpec, ended: RequestLoop, receiving: Int, baselineRSSKilobytes: Int, openRSSKilobytes: Int
    ) async -> Outcome {
        _ = await waitUntilReceiving(spec.count, deadline: spec.deadline) { ended.progress.finished }
        var outcome = ended.progress.outcome
        let unreported = spec.count - ended.progress.finished
        if unreported > 0 { outcome.fail("\(unreported) cancelled transfers never completed") }
        outcome.completed = 0
        outcome.slow = SlowSample(
            requested: spec.count, receiving: receiving, baselineRSSKilobytes: baselineRSSKilobytes,
            openRSSKilobytes: openRSSKilobytes)
        return outcome
    }
}
