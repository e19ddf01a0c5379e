import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore
import Serialization
import Synchronization

/// When a churned manager is released.
enum ReleasePoint { case atOnce, smallCompleted, slowResponseHead }

/// `count` managers, each created, given transfers (a slow GET, a small GET, a download to a
/// file) and released while they are in flight; at most `window` at a time are winding
/// down. Afterwards no driver thread, no extra thread and no extra descriptor may remain.
struct ManagerChurn {
    let options: SoakOptions
    private let window = 8
    private let tasksPerManager = 3

    func run(baseline: ProcessSample) -> [String] {
        var failures: [String] = []
        let temporary = options.directory.appendingPathComponent("partial")
        let downloads = options.directory.appendingPathComponent("done")
        for directory in [temporary, downloads] {
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = temporary
        let ledger = HandlerLedger(capacity: options.count * tasksPerManager)
        let slots = DispatchSemaphore(value: window)
        // A first manager, created and released, so that one-time set-up (libcurl's global
        // state, the system CA store's cache, dispatch's worker threads) is in the baseline.
        cycle(-1, configuration: configuration, ledger: nil, slots: slots, downloads: downloads, release: .slowResponseHead)
        guard slots.wait(timeout: .now() + 30) == .success else { return ["the warm-up manager's handlers never ran"] }
        slots.signal()
        let before = settle(to: baseline)
        print("before the manager:  \(baseline)")
        print("after one manager:   \(before)")
        let started = ProcessProbe.now()
        var highest = before
        for index in 0..<options.count {
            if slots.wait(timeout: .now() + options.phaseTimeout) == .timedOut {
                let missing = ledger.missing(in: 0..<(index * tasksPerManager))
                failures.append("stalled at manager \(index): \(missing.count) handlers never called (first: \(missing.first))")
                break
            }
            // Half are released as soon as their transfers are started, half once the small GET
            // has completed (the others are then connected and under way), and one in 50 once
            // the slow one has its response head (nginx holds it ~200 ms), its body arriving.
            let phase: ReleasePoint = index % 50 == 49 ? .slowResponseHead : (index % 2 == 1 ? .smallCompleted : .atOnce)
            cycle(index, configuration: configuration, ledger: ledger, slots: slots, downloads: downloads, release: phase)
            if (index + 1) % max(1, options.count / 10) == 0 {
                let sample = ProcessProbe.sample()
                if sample.threads > highest.threads { highest = sample }
                print(String(format: "[%6d] %6.1f s  %@ | %@", index + 1, ProcessProbe.now() - started, sample.description, ledger.outcomeSummary))
                fflush(nil)
            }
        }
        var drained = 0
        for _ in 0..<window {
            guard slots.wait(timeout: .now() + options.phaseTimeout) == .success else {
                failures.append("the last managers' handlers never all ran")
                break
            }
            drained += 1
        }
        // Back to its initial value: libdispatch traps when a semaphore below it is released.
        for _ in 0..<drained { slots.signal() }
        let seconds = ProcessProbe.now() - started
        let after = settle(to: before)
        print(String(format: "%d managers in %.1f s (%.0f per second)", options.count, seconds, Double(options.count) / seconds))
        print("after the churn:     \(after)")
        if after.driverThreads != 0 { failures.append("\(after.driverThreads) driver threads left") }
        if after.threads > before.threads { failures.append("threads: \(after.threads) after, \(before.threads) before") }
        if after.descriptors != before.descriptors { failures.append("descriptors: \(after) after, \(before) before") }
        let missing = ledger.missing(in: 0..<(options.count * tasksPerManager))
        if missing.count > 0 { failures.append("\(missing.count) handlers never called (first: \(missing.first))") }
        if !ledger.doubles.isEmpty { failures.append("handlers called more than once for tasks \(ledger.doubles)") }
        let unexpected = ledger.unexpectedOutcomes(allowed: ["ok", "cancelled", "sessionInvalidated"])
        if !unexpected.isEmpty { failures.append("unexpected outcomes: \(unexpected)") }
        let left = [temporary, downloads].reduce(0) { $0 + ((try? FileManager.default.contentsOfDirectory(atPath: $1.path).count) ?? 0) }
        if left != 0 { failures.append("\(left) files left in \(options.directory.path)") }
        print("outcomes: \(ledger.outcomeSummary)")
        return failures
    }

    /// One manager's life: created, given its transfers, released. Its last handler frees a slot.
    private func cycle(
        _ index: Int, configuration: SessionConfiguration, ledger: HandlerLedger?, slots: DispatchSemaphore,
        downloads: URL, release: ReleasePoint
    ) {
        let manager = URLSessionManager(configuration: configuration)
        manager.responseSerializer = HTTPResponseSerializer()
        let remaining = Atomic<Int>(tasksPerManager)
        let destination = downloads.appendingPathComponent("m-\(index)")
        let handler: @Sendable (Int, DataResponse) -> Void = { slot, response in
            let outcome = response.error.map(errorKind) ?? "ok"
            if slot == 2 { unlink(destination.path) }
            let first = ledger?.record(max(0, index) * 3 + slot, outcome: outcome) ?? true
            if first && remaining.subtract(1, ordering: .relaxed).newValue == 0 { slots.signal() }
        }
        let slow = manager.dataTask(with: URLRequest(url: options.url("/slow.bin", slow: true))) { handler(0, $0) }
        let small = manager.dataTask(with: URLRequest(url: options.url("/small.txt"))) { handler(1, $0) }
        var range = URLRequest(url: options.url("/1g.bin"))
        range.setValue("bytes=0-65535", forHTTPHeaderField: "Range")
        let download = manager.downloadTask(with: range, destination: { _, _ in destination }) { handler(2, $0) }
        for task in [slow, small, download] { task.resume() }
        let limit = ProcessProbe.now() + 5
        switch release {
        case .atOnce: break
        case .smallCompleted: while small.state != .completed && ProcessProbe.now() < limit { usleep(100) }
        case .slowResponseHead: while slow.response == nil && ProcessProbe.now() < limit { usleep(200) }
        }
        // The manager is released here, its tasks with it (nothing else holds them).
    }

    /// Waits (bounded, 30 s: dispatch's idle worker threads take a few seconds to exit) for the
    /// threads and descriptors to come back to `target`'s counts.
    private func settle(to target: ProcessSample) -> ProcessSample {
        var sample = ProcessProbe.sample()
        let limit = ProcessProbe.now() + 30
        while (sample.driverThreads > 0 || sample.threads > target.threads || sample.descriptors > target.descriptors)
            && ProcessProbe.now() < limit {
            usleep(100_000)
            sample = ProcessProbe.sample()
        }
        return sample
    }
}
