import Foundation

// curlew-soak: the soak and load runs of Docs/Reliability.md ("Soak and load") against the
// nginx that `Scripts/bench.sh --serve` starts. Scripts/soak.sh runs all three modes.
//
//   curlew-soak [--requests 1000000] [--concurrency 64] [--interval 100000]
//   curlew-soak --cancel-storm 10000 [--rounds 3]
//   curlew-soak --manager-churn 10000

guard let options = SoakOptions.parse(Array(CommandLine.arguments.dropFirst())) else {
    print(SoakOptions.usage)
    exit(2)
}
try? FileManager.default.createDirectory(at: options.directory, withIntermediateDirectories: true)
// libdispatch opens its event descriptors (epoll, eventfd, timerfds) on first use, some on
// its manager thread after the first timer fired: used here (timers on the global and on a
// concurrent queue, as the run does), and given a moment, before the baseline, so that they
// are not counted as the run's.
let dispatchReady = DispatchSemaphore(value: 0)
DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { dispatchReady.signal() }
DispatchQueue(label: "curlew-soak.warm-up", attributes: .concurrent).asyncAfter(deadline: .now() + .milliseconds(2)) {
    dispatchReady.signal()
}
dispatchReady.wait()
dispatchReady.wait()
usleep(100_000)
let baseline = ProcessProbe.sample()
let baselineDescriptors = ProcessProbe.descriptorTable()
let started = ProcessProbe.now()
let failures: [String]
switch options.mode {
case .mixed:
    print("mixed soak: \(options.count) requests, concurrency \(options.concurrency), seed \(options.seed)")
    failures = MixedSoak(options: options).run(baseline: baseline, baselineDescriptors: baselineDescriptors)
case .cancelStorm:
    print("cancel storm: \(options.count) slow transfers x \(options.rounds) rounds")
    failures = CancelStorm(options: options).run(baseline: baseline)
case .managerChurn:
    print("manager churn: \(options.count) managers")
    failures = ManagerChurn(options: options).run(baseline: baseline)
}
try? FileManager.default.removeItem(at: options.directory)
print(String(format: "wall time %.1f s, peak RSS %.1f MiB", ProcessProbe.now() - started, peakRSSMiB()))
if failures.isEmpty {
    print("PASS")
    exit(0)
}
print("FAIL")
for failure in failures { print("  - \(failure)") }
exit(1)

/// The process's high-water RSS (getrusage's ru_maxrss, in KiB).
func peakRSSMiB() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}
