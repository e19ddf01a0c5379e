import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore
import Serialization
import Synchronization

// The `curlew` client's small-GET loop (one manager, completion handlers, raw bytes) with
// nothing else linked: valgrind 3.19 cannot load `curlew-bench`, which links AsyncHTTPClient,
// so instruction-level profiles come from this program. See Docs/Performance.md, "Profile".
//
//   curlew-profile URL [REQUESTS] [CONCURRENCY]
//   valgrind --tool=callgrind --separate-threads=yes \
//       Benchmarks/.build/release/curlew-profile http://127.0.0.1:27180/small.txt 5000 64
//   CURLEW_PROFILE_MONITOR=1 attaches one EventMonitor.
//   CURLEW_PROFILE_QUIET=1 turns the task notifications off (`postsTaskNotifications`).
//   CURLEW_PROFILE_CA=FILE trusts that CA (bench.sh --serve's .build/bench/ca.pem), and
//   CURLEW_PROFILE_H2=1 asks for HTTP/2 (https://127.0.0.1:27543/small.txt), as the
//   get-h2-tls-c64 workload does.
//   CURLEW_PROFILE_ASYNC=1 runs CONCURRENCY Swift tasks, each looping
//   `try await manager.dataResponse(for:)`, instead of completion handlers.

let arguments = CommandLine.arguments
guard arguments.count >= 2, let url = URL(string: arguments[1]) else {
    print("usage: curlew-profile URL [REQUESTS] [CONCURRENCY]")
    exit(2)
}
let total = arguments.count > 2 ? max(1, Int(arguments[2]) ?? 5_000) : 5_000
let concurrency = arguments.count > 3 ? max(1, Int(arguments[3]) ?? 64) : 64

var configuration = SessionConfiguration.default
configuration.httpMaximumConnectionsPerHost = concurrency
if let caFile = ProcessInfo.processInfo.environment["CURLEW_PROFILE_CA"] {
    configuration.certificateAuthorityFile = caFile
}
if ProcessInfo.processInfo.environment["CURLEW_PROFILE_H2"] == "1" {
    configuration.httpVersion = .http2
}
if let size = ProcessInfo.processInfo.environment["CURLEW_PROFILE_BUFFER"].flatMap({ Int($0) }) {
    configuration.receiveBufferSize = size  // experiments: the receive buffer's effect
}
if ProcessInfo.processInfo.environment["CURLEW_PROFILE_QUIET"] == "1" {
    configuration.postsTaskNotifications = false  // as bench.sh's `curlew-quiet` client
}
/// One monitor that counts responses and completions (`CURLEW_PROFILE_MONITOR=1`): what the
/// event seam costs, as bench.sh's `curlew-monitor` client.
/// `CURLEW_PROFILE_MONITOR=foundation` makes it take Foundation's response instead of the head.
final class CountingMonitor: EventMonitor, @unchecked Sendable {  // `lock` guards the counts
    let queue = DispatchQueue(label: "curlew-profile.monitor")
    let receivesFoundationResponses = ProcessInfo.processInfo.environment["CURLEW_PROFILE_MONITOR"] == "foundation"
    private let lock = NSLock()
    private var responses = 0
    private var completions = 0
    func task(_ task: SessionTask, didReceive response: HTTPURLResponse) { lock.withLock { responses += 1 } }
    func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) { lock.withLock { responses += 1 } }
    func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) { lock.withLock { completions += 1 } }
}
let monitors: [any EventMonitor] = ProcessInfo.processInfo.environment["CURLEW_PROFILE_MONITOR"] != nil ? [CountingMonitor()] : []
let manager = URLSessionManager(configuration: configuration, eventMonitors: monitors)
manager.responseSerializer = HTTPResponseSerializer()

/// Started and finished counts, and the failures.
struct Counts { var started = 0, finished = 0, failed = 0 }
let counts = Mutex(Counts())
let done = DispatchSemaphore(value: 0)
let request = URLRequest(url: url)

/// Starts the next request, if any is left; each completion starts the next one.
@Sendable func launch() {
    let go = counts.withLock { counts -> Bool in
        guard counts.started < total else { return false }
        counts.started += 1
        return true
    }
    guard go else { return }
    manager.dataTask(with: request) { response in
        if record(response.error) == total { done.signal() } else { launch() }
    }.resume()
}

/// Counts one finished request (and its failure, printing the first); returns how many finished.
@Sendable func record(_ failure: (any Error)?) -> Int {
    counts.withLock { counts -> Int in
        if let failure {
            if counts.failed == 0 { print("first failure: \(failure)") }
            counts.failed += 1
        }
        counts.finished += 1
        return counts.finished
    }
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
    return user + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

/// One Swift task's loop (`CURLEW_PROFILE_ASYNC=1`): the async API, request after request.
@Sendable func loop() async {
    while counts.withLock({ counts -> Bool in
        guard counts.started < total else { return false }
        counts.started += 1
        return true
    }) {
        let failure: (any Error)?
        do {
            _ = try await manager.dataResponse(for: request)
            failure = nil
        } catch {
            failure = error
        }
        if record(failure) == total { done.signal() }
    }
}

let cpuBefore = cpuSeconds()
let started = DispatchTime.now().uptimeNanoseconds
if ProcessInfo.processInfo.environment["CURLEW_PROFILE_ASYNC"] == "1" {
    for _ in 0..<min(concurrency, total) { Task.detached { await loop() } }
} else {
    for _ in 0..<min(concurrency, total) { launch() }
}
done.wait()
let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
let cpu = cpuSeconds() - cpuBefore
let failed = counts.withLock { $0.failed }
print(String(
    format: "%d requests in %.2f s: %.0f req/s, %.1f µs CPU per request, %d failed",
    total, seconds, Double(total) / seconds, cpu / Double(total) * 1e6, failed))
exit(failed == 0 ? 0 : 1)
