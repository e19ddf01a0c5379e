import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore
import Serialization
import Synchronization

/// `count` transfers held open at once against nginx's 1 KiB/s port, then all cancelled;
/// `rounds` times through one manager. Every handler must run once with `.cancelled`, every
/// socket must close, and RSS must come back to its baseline once the manager is gone.
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
            let tasks = (0..<options.count).map { index in
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
            // The sockets close on the driver thread after the handlers are queued: wait (bounded).
            var after = ProcessProbe.sample()
            let settleLimit = ProcessProbe.now() + 10
            while after.sockets > before.sockets && ProcessProbe.now() < settleLimit {
                usleep(50_000)
                after = ProcessProbe.sample()
            }
            let rawRSS = after.rssMiB
            ProcessProbe.trimHeap()
            after = ProcessProbe.sample()
            afterRounds.append(after)
            print(String(
                format: "round %d: %d/%d receiving after %.1f s; open: %@\n         all handled %.1f s after cancelling; after: %@ (RSS %.2f MiB before malloc_trim)",
                round + 1, receiving, options.count, opened, open.description, cancelled, after.description, rawRSS))
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
        // While the manager lives, what a storm leaves (after malloc_trim) is held by it and
        // varies by tens of MiB from round to round (Docs/Reliability.md): a later round may not
        // exceed the first by more than a quarter. Once the manager is gone, RSS must be back
        // within 4 MiB of where it was before the first round.
        if let first = afterRounds.first {
            let highest = afterRounds.map(\.rssBytes).max() ?? first.rssBytes
            print(String(
                format: "RSS before round 1 %.2f MiB; after each round (trimmed) %@ MiB; after invalidation %.2f MiB (%+.2f MiB; limit +4 MiB)",
                before.rssMiB, afterRounds.map { String(format: "%.1f", $0.rssMiB) }.joined(separator: ", "),
                released.rssMiB, released.rssMiB - before.rssMiB))
            if Double(highest) > Double(first.rssBytes) * 1.25 {
                failures.append(String(format: "RSS after a later round %.1f MiB, after the first %.1f MiB", Double(highest) / 1_048_576, first.rssMiB))
            }
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
