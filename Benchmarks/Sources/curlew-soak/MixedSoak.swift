import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore
import Serialization
import Synchronization

/// The long run: `count` requests of every kind through one manager, `concurrency` at a time,
/// measured (quiesced) after every `interval` of them.
final class MixedSoak: Sendable {
    private struct Segment {
        var next = 0
        var end = 0
        var remaining = 0
    }
    private let options: SoakOptions
    private let manager: URLSessionManager
    private let ledger: HandlerLedger
    private let segment = Mutex(Segment())
    private let segmentDone = DispatchSemaphore(value: 0)
    private let invalidated = DispatchSemaphore(value: 0)
    /// Runs the delayed cancels, suspends and resumes, off the completion queue.
    private let chaos = DispatchQueue(label: "curlew-soak.chaos", attributes: .concurrent)
    private let uploadBody = Data(repeating: 0x61, count: 64 * 1024)
    private let problems = Mutex<[String]>([])
    /// Outcomes by what was done to the task ("cancelLater: ok 5, cancelled 95").
    private let byAction = Mutex<[String: [String: Int]]>([:])
    /// Tasks by kind.
    private let byKind = Mutex<[String: Int]>([:])
    private let downloads: URL
    private let temporary: URL

    init(options: SoakOptions) {
        self.options = options
        downloads = options.directory.appendingPathComponent("done")
        temporary = options.directory.appendingPathComponent("partial")
        for directory in [downloads, temporary] {
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = options.concurrency
        configuration.downloadDirectory = temporary
        manager = URLSessionManager(configuration: configuration)
        manager.responseSerializer = HTTPResponseSerializer()
        ledger = HandlerLedger(capacity: options.count)
        let invalidated = invalidated
        manager.setSessionDidBecomeInvalidBlock { _ in invalidated.signal() }
    }

    /// Runs every segment; returns the failures (empty: passed).
    func run(baseline: ProcessSample, baselineDescriptors: [Int32: String]) -> [String] {
        var failures: [String] = []
        let afterManager = ProcessProbe.sample()
        print("before the manager: \(baseline)")
        print("manager created:    \(afterManager)")
        let started = ProcessProbe.now()
        var samples: [ProcessSample] = []
        var segmentStart = started
        while true {
            let (first, end) = segment.withLock { segment -> (Int, Int) in
                let first = segment.end
                segment.next = first
                segment.end = min(options.count, first + options.interval)
                segment.remaining = segment.end - first
                return (first, segment.end)
            }
            guard end > first else { break }
            for _ in 0..<min(options.concurrency, end - first) { launch() }
            if segmentDone.wait(timeout: .now() + options.phaseTimeout) == .timedOut {
                let missing = ledger.missing(in: first..<end)
                failures.append("segment \(first)..<\(end) stalled: \(missing.count) handlers never called (first: \(missing.first))")
                break
            }
            let now = ProcessProbe.now()
            // RSS as it is, then after malloc_trim: the allocator's free lists move the first
            // by MiBs from one report to the next; the second is what is held.
            let raw = ProcessProbe.residentBytes()
            ProcessProbe.trimHeap()
            let sample = ProcessProbe.sample()
            samples.append(sample)
            let left = leftoverFiles()
            print(String(
                format: "[%9d] %7.1f s (%6.0f req/s)  RSS %.2f MiB untrimmed, %@  handlers %d, doubles %d, files left %d | %@",
                end, now - started, Double(end - first) / (now - segmentStart), Double(raw) / 1_048_576, sample.description,
                ledger.handled, ledger.doubles.count, left, ledger.outcomeSummary))
            fflush(nil)
            segmentStart = now
        }
        let seconds = ProcessProbe.now() - started
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        if invalidated.wait(timeout: .now() + 30) == .timedOut { failures.append("the manager never finished invalidating") }
        let settled = settle(toDrivers: afterManager.driverThreads - 1)
        print(String(format: "%d requests in %.1f s (%.0f req/s)", ledger.handled, seconds, Double(ledger.handled) / seconds))
        print("after invalidation: \(settled)")
        failures += verdict(
            samples: samples, afterManager: afterManager, baseline: baseline, settled: settled,
            baselineDescriptors: baselineDescriptors)
        return failures
    }

    private func verdict(
        samples: [ProcessSample], afterManager: ProcessSample, baseline: ProcessSample, settled: ProcessSample,
        baselineDescriptors: [Int32: String]
    ) -> [String] {
        var failures: [String] = []
        if let warm = samples.first, samples.count > 1 {
            let highest = samples.dropFirst().map(\.rssBytes).max() ?? warm.rssBytes
            let growth = Double(highest - warm.rssBytes) / 1_048_576
            print(String(
                format: "RSS (after malloc_trim) after warm-up %.2f MiB, highest later %.2f MiB (%+.2f MiB; limit +2 MiB)",
                warm.rssMiB, Double(highest) / 1_048_576, growth))
            if growth > 2 { failures.append(String(format: "RSS grew %.2f MiB after the warm-up", growth)) }
            for (index, sample) in samples.enumerated().dropFirst()
            where sample.files != warm.files || sample.otherDescriptors != warm.otherDescriptors {
                failures.append("descriptors at report \(index + 1): \(sample), after warm-up: \(warm)")
            }
        } else {
            print("RSS: fewer than two reports, no growth check (use --interval)")
        }
        for sample in samples where sample.sockets - afterManager.sockets > options.concurrency {
            failures.append("more idle sockets than connections allowed: \(sample)")
        }
        if settled.descriptors != baseline.descriptors {
            let extra = ProcessProbe.opened(since: baselineDescriptors, now: ProcessProbe.descriptorTable())
            failures.append("descriptors after invalidation \(settled.descriptors), before the manager \(baseline.descriptors): \(extra)")
        }
        if settled.driverThreads != baseline.driverThreads { failures.append("driver threads left: \(settled.driverThreads)") }
        let missing = ledger.missing(in: 0..<options.count)
        if missing.count > 0 { failures.append("\(missing.count) handlers never called (first: \(missing.first))") }
        if !ledger.doubles.isEmpty { failures.append("handlers called more than once for tasks \(ledger.doubles)") }
        let unexpected = ledger.unexpectedOutcomes(allowed: ["ok", "cancelled"])
        if !unexpected.isEmpty { failures.append("outcomes other than ok and cancelled: \(unexpected)") }
        print("tasks by kind: " + byKind.withLock { $0 }.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        for (action, outcomes) in byAction.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            print("  \(action): " + outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        let shown = problems.withLock { $0 }
        if !shown.isEmpty { print("first unexpected responses:\n  " + shown.joined(separator: "\n  ")) }
        let left = leftoverFiles()
        if left != 0 { failures.append("\(left) files left in \(options.directory.path)") }
        return failures
    }

    /// Waits (bounded) for the driver thread to end and the descriptors to close.
    private func settle(toDrivers drivers: Int) -> ProcessSample {
        var sample = ProcessProbe.sample()
        let limit = ProcessProbe.now() + 10
        while sample.driverThreads > max(0, drivers) && ProcessProbe.now() < limit {
            usleep(50_000)
            sample = ProcessProbe.sample()
        }
        return sample
    }

    private func leftoverFiles() -> Int {
        [downloads, temporary].reduce(0) { $0 + ((try? FileManager.default.contentsOfDirectory(atPath: $1.path).count) ?? 0) }
    }

    /// Starts the segment's next task, if any is left.
    private func launch() {
        let id = segment.withLock { segment -> Int? in
            guard segment.next < segment.end else { return nil }
            defer { segment.next += 1 }
            return segment.next
        }
        guard let id else { return }
        let plan = MixedPlan(id: id, seed: options.seed)
        let destination = downloads.appendingPathComponent("d-\(id)")
        let completion: @Sendable (DataResponse) -> Void = { [self] response in finished(plan, response, destination) }
        let task: SessionTask
        switch plan.kind {
        case .small:
            task = manager.dataTask(with: URLRequest(url: options.url("/small.txt")), completionHandler: completion)
        case .redirect:
            task = manager.dataTask(with: URLRequest(url: options.url("/soak-redirect")), completionHandler: completion)
        case .upload:
            var request = URLRequest(url: options.url("/upload"))
            request.httpMethod = "POST"
            task = manager.uploadTask(with: request, from: uploadBody.prefix(plan.size), completionHandler: completion)
        case .download:
            var request = URLRequest(url: options.url("/1g.bin"))
            request.setValue("bytes=0-\(plan.size - 1)", forHTTPHeaderField: "Range")
            task = manager.downloadTask(with: request, destination: { _, _ in destination }, completionHandler: completion)
        }
        perform(plan, on: task)
    }

    private func perform(_ plan: MixedPlan, on task: SessionTask) {
        let later = DispatchTime.now() + .microseconds(plan.delay)
        switch plan.action {
        case .none:
            task.resume()
        case .cancelBeforeResume:
            task.cancel()
            task.resume()  // must not start it again
        case .cancelAfterResume:
            task.resume()
            task.cancel()
        case .cancelLater:
            task.resume()
            chaos.asyncAfter(deadline: later) { task.cancel() }
        case .suspendThenResume:
            task.resume()
            let pause = plan.pause
            chaos.asyncAfter(deadline: later) { [chaos] in
                task.suspend()
                chaos.asyncAfter(deadline: .now() + .microseconds(pause)) { task.resume() }
            }
        case .suspendThenCancel:
            task.resume()
            let pause = plan.pause
            chaos.asyncAfter(deadline: later) { [chaos] in
                task.suspend()
                chaos.asyncAfter(deadline: .now() + .microseconds(pause)) {
                    task.cancel()
                    task.resume()  // a cancelled task stays cancelled
                }
            }
        }
    }

    private func finished(_ plan: MixedPlan, _ response: DataResponse, _ destination: URL) {
        let outcome: String
        switch response.result {
        case .failure(let error):
            outcome = errorKind(error)
            if outcome != "cancelled" { note("task \(plan.id) \(plan.kind) \(plan.action): \(error)") }
        case .success:
            if let problem = plan.problem(with: response, destination: destination) {
                outcome = "unexpected-\(plan.kind.rawValue)"
                note("task \(plan.id) \(plan.kind) \(plan.action): \(problem)")
            } else {
                outcome = "ok"
            }
        }
        if plan.kind == .download { unlink(destination.path) }
        guard ledger.record(plan.id, outcome: outcome) else { return }
        byAction.withLock { $0[plan.action.rawValue, default: [:]][outcome, default: 0] += 1 }
        byKind.withLock { $0[plan.kind.rawValue, default: 0] += 1 }
        let last = segment.withLock { segment -> Bool in
            segment.remaining -= 1
            return segment.remaining == 0
        }
        if last { segmentDone.signal() } else { launch() }
    }

    private func note(_ problem: String) {
        problems.withLock { if $0.count < 20 { $0.append(problem) } }
    }
}
