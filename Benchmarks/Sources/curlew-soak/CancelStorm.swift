import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore
import Serialization
import Synchronization

/// `count` transfers held open at once against nginx's 1 KiB/s port, then all cancelled;
/// `rounds` times through one manager. Every handler must run once with `.cancelled`, every
/// socket must close, RSS must come back to where the first round left it, and to its
/// baseline once the manager is gone.
struct CancelStorm {
    let options: SoakOptions

    func run(baseline: ProcessSample) -> [String] {
        var failures: [String] = []
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 0  // no limit: all of them at once
        configuration.httpVersion = .http1_1
        let invalidated = DispatchSemaphore(value: 0)
        let manager = URLSessionManager(configuration: configuration)
        manager.responseSerializer = HTTPResponseSerializer()
        manager.setSessionDidBecomeInvalidBlock { _ in invalidated.signal() }
        let ledger = HandlerLedger(capacity: options.count * options.rounds)
        // One ordinary request first, so that one-time set-up (libcurl's, the manager's) is in
        // the baseline, not in the first round.
        let warm = DispatchSemaphore(value: 0)
        manager.dataTask(with: URLRequest(url: options.url("/small.txt"))) { _ in warm.signal() }.resume()
        _ = warm.wait(timeout: .now() + 30)
        ProcessProbe.trimHeap()
        let before = ProcessProbe.sample()
        print("before the manager: \(baseline)")
        print("before round 1:     \(before)")
        var afterRounds: [ProcessSample] = []
        for round in 0..<options.rounds {
            let started = ProcessProbe.now()
            let base = round * options.count
            let handled = DispatchSemaphore(value: 0)
            let remaining = Atomic<Int>(options.count)
            let request = URLRequest(url: options.url("/slow.bin", slow: true))
            var tasks = (0..<options.count).map { index in
                manager.dataTask(with: request) { response in
                    let outcome = response.error.map(errorKind) ?? "completed"
                    if ledger.record(base + index, outcome: outcome),
                        remaining.subtract(1, ordering: .relaxed).newValue == 0 {
                        handled.signal()
                    }
                }
            }
            for task in tasks { task.resume() }
            // Bounded: all receiving, or the phase timeout.
            var receiving = 0
            let limit = ProcessProbe.now() + options.phaseTimeout
            while ProcessProbe.now() < limit {
                receiving = tasks.reduce(0) { $0 + ($1.countOfBytesReceived > 0 ? 1 : 0) }
                if receiving == options.count { break }
                usleep(100_000)
            }
            let open = ProcessProbe.sample()
            let opened = ProcessProbe.now() - started
            for task in tasks { task.cancel() }
            if handled.wait(timeout: .now() + options.phaseTimeout) == .timedOut {
                let missing = ledger.missing(in: base..<(base + options.count))
                failures.append("round \(round + 1): \(missing.count) handlers never called (first: \(missing.first))")
            }
            let cancelled = ProcessProbe.now() - started - opened
            // The soak's own references go before the samples: what stays is Curlew's.
            tasks.removeAll()
            // The sockets close on the driver thread after the handlers are queued: wait (bounded).
            var after = ProcessProbe.sample()
            let settleLimit = ProcessProbe.now() + 10
            while after.sockets > before.sockets && ProcessProbe.now() < settleLimit {
                usleep(50_000)
                after = ProcessProbe.sample()
            }
            after = ProcessProbe.sample()
            let rawRSS = after.rssMiB
            // Memory is still being freed for a while after the last handler ran (sampled at
            // once, RSS read 39–146 MiB after the same storm): trim and sample every 250 ms
            // until it stops falling (under 0.25 MiB in 2 s), at most 15 s.
            let settleStart = ProcessProbe.now()
            var history: [Int] = []
            repeat {
                ProcessProbe.trimHeap()
                after = ProcessProbe.sample()
                history.append(after.rssBytes)
                if history.count >= 9 && history[history.count - 9] - after.rssBytes < 262_144 { break }
                usleep(250_000)
            } while ProcessProbe.now() - settleStart < 15
            let settled = ProcessProbe.now() - settleStart
            afterRounds.append(after)
            let mapped = ProcessProbe.residentByMapping()
            print(String(
                format: "         resident after trimming: [heap] %.1f MiB, anonymous mappings %.1f MiB, files %.1f MiB",
                Double(mapped.heap) / 1_048_576, Double(mapped.anonymous) / 1_048_576, Double(mapped.other) / 1_048_576))
            print(String(
                format: "round %d: %d/%d receiving after %.1f s; open: %@\n         all handled %.1f s after cancelling (RSS %.2f MiB then); settled %.1f s later: %@",
                round + 1, receiving, options.count, opened, open.description, cancelled, rawRSS, settled, after.description))
            fflush(nil)
            if receiving < options.count { failures.append("round \(round + 1): only \(receiving) of \(options.count) transfers were receiving") }
            if after.descriptors != before.descriptors { failures.append("round \(round + 1): descriptors \(after) against \(before)") }
        }
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        if invalidated.wait(timeout: .now() + 30) == .timedOut { failures.append("the manager never finished invalidating") }
        // What the manager itself held (its idle handle pool, libcurl's tables): gone with it.
        var released = ProcessProbe.sample()
        let settleLimit = ProcessProbe.now() + 10
        while released.driverThreads > baseline.driverThreads && ProcessProbe.now() < settleLimit {
            usleep(50_000)
            released = ProcessProbe.sample()
        }
        ProcessProbe.trimHeap()
        released = ProcessProbe.sample()
        print("manager invalidated: \(released) (after malloc_trim)")
        if released.descriptors != baseline.descriptors { failures.append("descriptors after invalidation: \(released), before the manager: \(baseline)") }
        if released.driverThreads != baseline.driverThreads { failures.append("driver thread left: \(released)") }
        // The first round is the warm-up (tables sized for `count` transfers stay): later
        // rounds must leave RSS within 2 MiB of where the first left it, and once the manager
        // is gone RSS must be within 4 MiB of where it was before the first round.
        if let first = afterRounds.first {
            let highest = afterRounds.dropFirst().map(\.rssBytes).max() ?? first.rssBytes
            let growth = Double(highest - first.rssBytes) / 1_048_576
            print(String(
                format: "RSS before round 1 %.2f MiB; after each round (settled, trimmed) %@ MiB (%+.2f MiB after round 1; limit +2 MiB); after invalidation %.2f MiB (%+.2f MiB; limit +4 MiB)",
                before.rssMiB, afterRounds.map { String(format: "%.2f", $0.rssMiB) }.joined(separator: ", "), growth,
                released.rssMiB, released.rssMiB - before.rssMiB))
            if growth > 2 { failures.append(String(format: "RSS %.2f MiB above its level after round 1", growth)) }
            if released.rssMiB - before.rssMiB > 4 {
                failures.append(String(format: "RSS %.2f MiB above its baseline once the manager is gone", released.rssMiB - before.rssMiB))
            }
        }
        if !ledger.doubles.isEmpty { failures.append("handlers called more than once for tasks \(ledger.doubles)") }
        let unexpected = ledger.unexpectedOutcomes(allowed: ["cancelled"])
        if !unexpected.isEmpty { failures.append("outcomes other than cancelled: \(unexpected)") }
        print("outcomes: \(ledger.outcomeSummary)")
        return failures
    }
}
