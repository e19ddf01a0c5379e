import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `cancel()` racing the transfer's own completion, thousands of times: whichever wins, the
/// completion handler runs exactly once, with either the response or `SessionError.cancelled`,
/// and no task stays in the manager.
final class CancelRaceTests: XCTestCase {
    /// What the handlers saw, keyed by task identifier.
    private final class Ledger: Sendable {
        struct Counts {
            var calls: [Int: Int] = [:]
            var successes = 0
            var cancels = 0
            var others: [String] = []
            var total = 0
        }
        let counts = Mutex(Counts())

        func record(_ task: Int, _ response: DataResponse) {
            counts.withLock { counts in
                counts.calls[task, default: 0] += 1
                counts.total += 1
                switch response.result {
                case .success where response.response?.statusCode == 200: counts.successes += 1
                case .failure(let error) where error as? SessionError == .cancelled: counts.cancels += 1
                default: counts.others.append("\(task): \(String(describing: response.error)) \(String(describing: response.response?.statusCode))")
                }
            }
        }

        var total: Int { counts.withLock { $0.total } }
    }

    private var server: TestServer!

    override func setUp() async throws {
        server = try TestServer()
        server.route("/quick", response: .text("ok"))
    }

    override func tearDown() async throws { server.shutdown() }

    /// Runs `count` tasks, at most `window` at a time; `interfere` acts on each task right after
    /// `resume()` from another queue, racing the transfer.
    private func race(
        count: Int, window: Int, manager: URLSessionManager, interfere: @escaping @Sendable (DataTask, Int) -> Void
    ) async throws -> Ledger {
        let ledger = Ledger()
        let url = try server.url("/quick")
        let racers = DispatchQueue(label: "curlew.cancel-race", attributes: .concurrent)
        var started = 0
        while started < count {
            let batch = min(window, count - started)
            for index in started..<(started + batch) {
                let identifier = Mutex(-1)
                let task = manager.dataTask(with: URLRequest(url: url)) { response in
                    ledger.record(identifier.withLock { $0 }, response)
                }
                identifier.withLock { $0 = task.taskIdentifier }
                task.resume()
                racers.async { interfere(task, index) }
            }
            started += batch
            // A bounded wait for this window (a hang guard, not a time measurement).
            for _ in 0..<3000 where ledger.total < started { try await Task.sleep(nanoseconds: 10_000_000) }
            XCTAssertEqual(ledger.total, started, "a window of tasks never completed")
            if ledger.total < started { break }
        }
        // Late duplicates would land on the completion queue after the last first call.
        await withCheckedContinuation { continuation in manager.completionQueue.async { continuation.resume() } }
        return ledger
    }

    private func assertExactlyOnce(_ ledger: Ledger, count: Int, manager: URLSessionManager, file: StaticString = #filePath, line: UInt = #line) async throws {
        let counts = ledger.counts.withLock { $0 }
        XCTAssertEqual(counts.calls.count, count, "tasks whose handler ran", file: file, line: line)
        let repeated = counts.calls.filter { $0.value != 1 }
        XCTAssertTrue(repeated.isEmpty, "handlers called more than once: \(repeated.prefix(5))", file: file, line: line)
        XCTAssertEqual(counts.successes + counts.cancels, count, "outcomes other than 200 or cancelled: \(counts.others.prefix(5))", file: file, line: line)
        try await eventually({ manager.tasks.isEmpty }, "tasks left in the manager: \(manager.tasks.count)", file: file, line: line)
    }

    /// 10,000 tasks. Seven in eight are cancelled from another thread after a spin of 0 to 63
    /// iterations: some before the request goes out, some mid-exchange, some after the answer
    /// arrived. The eighth is cancelled from the data hook, once its body has arrived: the
    /// driver reads the transfer's end in the same pass as that body and takes the cancel only
    /// at its next pass, so there the completion is meant to win. Both sides of the race are
    /// reached by construction, not by the luck of the scheduler.
    func testCancelRacingCompletionTenThousandTimes() async throws {
        let manager = URLSessionManager.raw()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let cancelsLate: @Sendable (DataTask) -> Bool = { $0.taskIdentifier % 8 == 0 }
        manager.setDataTaskDidReceiveDataBlock { task, _ in
            if cancelsLate(task) { task.cancel() }
        }
        let count = 10_000
        let ledger = try await race(count: count, window: 200, manager: manager) { task, index in
            if cancelsLate(task) { return }
            var spin = 0
            for _ in 0..<(index % 64) { spin &+= 1 }
            withExtendedLifetime(spin) { task.cancel() }
        }
        try await assertExactlyOnce(ledger, count: count, manager: manager)
        let counts = ledger.counts.withLock { $0 }
        // Both sides of the race were reached; otherwise the test proves nothing.
        XCTAssertGreaterThan(counts.cancels, 0, "no cancel won the race")
        XCTAssertGreaterThan(counts.successes, 0, "no completion won the race")
    }

    /// Suspend, resume and a double cancel from two threads, racing completion: still one call.
    func testSuspendResumeAndDoubleCancelRacingCompletion() async throws {
        let manager = URLSessionManager.raw()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let count = 2_000
        let other = DispatchQueue(label: "curlew.cancel-race.other")
        let ledger = try await race(count: count, window: 100, manager: manager) { task, index in
            switch index % 3 {
            case 0:
                task.suspend()
                task.resume()
                task.cancel()
            case 1:
                task.suspend()
                other.async { task.cancel() }
                task.resume()
            default:
                other.async { task.cancel() }
                task.cancel()
            }
        }
        try await assertExactlyOnce(ledger, count: count, manager: manager)
    }
}
