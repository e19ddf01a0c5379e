import CurlewTestSupport
import Foundation
import Logging
@testable import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `EventMonitor`: each task's events reach every monitor exactly once, in the documented
/// order, on the monitor's queue and never on the driver thread.
final class EventMonitorTests: XCTestCase {
    var server: TestServer!
    var managers: [URLSessionManager] = []

    override func setUp() async throws {
        server = try TestServer()
        server.route("/ok", response: .text("ok"))
    }

    override func tearDown() async throws {
        for manager in managers {
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            await manager.waitUntilInvalidated()
        }
        managers = []
        server.shutdown()
    }

    private func manager(_ monitors: [any EventMonitor], _ configuration: SessionConfiguration = .default) -> URLSessionManager {
        let manager = URLSessionManager(configuration: configuration, eventMonitors: monitors)
        var serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(100..<600)
        serializer.acceptableContentTypes = nil
        manager.responseSerializer = serializer
        managers.append(manager)
        return manager
    }

    /// Runs `task` and waits until `monitor` has seen its `didProduce`.
    private func run(_ task: SessionTask, _ monitor: RecordingMonitor) async throws {
        task.resume()
        try await waitForProduce(task, monitor)
    }

    private func waitForProduce(_ task: SessionTask, _ monitor: RecordingMonitor) async throws {
        for _ in 0..<3000 where !(monitor.lines(for: task).last?.hasPrefix("produce") ?? false) {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        // Anything that would come late (a duplicate) has had its chance to arrive.
        let settled = expectation(description: "monitor queue drained")
        monitor.queue.async { settled.fulfill() }
        await fulfillment(of: [settled], timeout: 10)
    }

    private func assertPlacedRight(_ monitor: RecordingMonitor, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(monitor.allEntries.isEmpty, file: file, line: line)
        XCTAssertTrue(
            monitor.allEntries.allSatisfy(\.placedRight),
            "every event on the monitor's queue, none on the driver thread", file: file, line: line)
    }

    func testASuccessfulRequestReportsEachEventOnceInOrder() async throws {
        let monitor = RecordingMonitor()
        let manager = manager([monitor])
        XCTAssertEqual(manager.eventMonitors.count, 1)
        XCTAssertTrue(manager.eventMonitors.first as? RecordingMonitor === monitor)
        let task = manager.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: { _ in })
        try await run(task, monitor)
        XCTAssertEqual(
            monitor.lines(for: task),
            ["create", "resume", "send GET /ok", "receive 200", "metrics 1", "complete ok", "produce ok"])
        assertPlacedRight(monitor)
        // The manager's invalidation comes last.
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
        try await eventually({ monitor.allEntries.last?.line == "invalidate" }, "managerDidInvalidate")
        XCTAssertEqual(monitor.allEntries.filter { $0.line == "invalidate" }.count, 1)
    }

    func testAMonitorThatTakesTheHeadNeverCostsAFoundationResponse() async throws {
        let headOnly = RecordingMonitor(label: "test.head-only", foundationResponses: false)
        let composite = CompositeEventMonitor(monitors: [RecordingMonitor(label: "test.inner", foundationResponses: false)])
        XCTAssertFalse(composite.receivesFoundationResponses)
        let manager = manager([headOnly, composite, LoggingEventMonitor(logger: Logger(label: "test"))])
        let task = manager.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: nil)
        try await run(task, headOnly)
        XCTAssertEqual(
            headOnly.lines(for: task),
            ["create", "resume", "send GET /ok", "head 200 \(task.responseHead?.fieldCount ?? -1) fields", "metrics 1",
             "complete ok", "produce ok"])
        // Nobody asked for Foundation's response and the completion handler is nil: it was
        // never built (the head builds it on first use only).
        let head = try XCTUnwrap(task.responseHead)
        XCTAssertFalse(head.isResponseBuilt, "a Foundation response was built that nobody reads")

        // One monitor that does take it makes the hub build it, once, for that monitor only.
        let both = RecordingMonitor(label: "test.foundation")
        let other = self.manager([headOnly, both])
        let second = other.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: nil)
        try await run(second, both)
        try await waitForProduce(second, headOnly)
        XCTAssertTrue(both.lines(for: second).contains("receive 200"))
        XCTAssertFalse(headOnly.lines(for: second).contains { $0.hasPrefix("receive") })
        XCTAssertTrue(headOnly.lines(for: second).contains { $0.hasPrefix("head 200") })
        other.invalidateSessionCancelingTasks(true, resetSession: false)
    }

    func testARefusedConnectionReportsTheFailure() async throws {
        let monitor = RecordingMonitor()
        let manager = manager([monitor])
        let port = try LoopbackPort.closed()
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:\(port)/refused"))
        let task = manager.dataTask(with: URLRequest(url: url), completionHandler: { _ in })
        try await run(task, monitor)
        XCTAssertEqual(
            monitor.lines(for: task),
            ["create", "resume", "send GET /refused", "metrics 1", "complete cannotConnect", "produce cannotConnect"])
        assertPlacedRight(monitor)
    }

    func testACancelledTaskReportsTheCancelBeforeItsCompletion() async throws {
        server.route("/slow", response: .stream([.init(Data("a".utf8)), .init(Data("b".utf8), delay: .seconds(30))]))
        let monitor = RecordingMonitor()
        let manager = manager([monitor])
        let task = manager.dataTask(with: URLRequest(url: try server.url("/slow")), completionHandler: { _ in })
        task.resume()
        try await eventually({ monitor.lines(for: task).contains("receive 200") }, "the head arrived")
        task.cancel()
        try await waitForProduce(task, monitor)
        XCTAssertEqual(
            monitor.lines(for: task),
            ["create", "resume", "send GET /slow", "receive 200", "cancel", "metrics 1", "complete cancelled",
             "produce cancelled"])
        assertPlacedRight(monitor)
    }

    /// A task the caller's response hook or challenge handler cancels is cancelled as by
    /// `cancel()`: the monitors hear `taskDidCancel` before its completion (they heard only the
    /// completion) and the task reads `.canceling` until it completes.
    func testACancelByAHookOrAHandlerReportsTheCancelBeforeItsCompletion() async throws {
        server.route("/private", response: TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")]))
        let monitor = RecordingMonitor()
        let byHook = manager([monitor])
        byHook.setDataTaskDidReceiveResponseBlock { _, _ in .cancel }
        let hooked = byHook.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: { _ in })
        try await run(hooked, monitor)
        XCTAssertEqual(
            monitor.lines(for: hooked),
            ["create", "resume", "send GET /ok", "receive 200", "cancel", "metrics 1", "complete cancelled", "produce cancelled"])
        assertPlacedRight(monitor)

        // The handler decides before the 401 is the task's response (reported at the end).
        let handlerMonitor = RecordingMonitor()
        let byHandler = manager([handlerMonitor])
        byHandler.setAuthenticationChallengeHandler { _, _ in .cancel }
        let challenged = byHandler.dataTask(with: URLRequest(url: try server.url("/private")), completionHandler: { _ in })
        try await run(challenged, handlerMonitor)
        XCTAssertEqual(
            handlerMonitor.lines(for: challenged),
            ["create", "resume", "send GET /private", "cancel", "receive 401", "metrics 1", "complete cancelled",
             "produce cancelled"])
        assertPlacedRight(handlerMonitor)
    }

    func testARedirectIsReportedBetweenItsTwoAttempts() async throws {
        let monitor = RecordingMonitor()
        let manager = manager([monitor])
        let url = try Peer.url("/redirect-to?url=%2Fget&status_code=302")
        let task = manager.dataTask(with: URLRequest(url: url), completionHandler: { _ in })
        try await run(task, monitor)
        XCTAssertEqual(
            monitor.lines(for: task),
            ["create", "resume", "send GET /redirect-to", "redirect 302 /get", "send GET /get", "receive 200",
             "metrics 2", "complete ok", "produce ok"])
        assertPlacedRight(monitor)
    }

    /// `/flaky` answers its first request with a 503 and every later one with "ok".
    private func routeFlaky() {
        let count = Mutex(0)
        server.route("/flaky") { _ in
            let attempt = count.withLock { value -> Int in
                value += 1
                return value
            }
            return attempt == 1 ? TestResponse(status: 503, body: Data("busy".utf8)) : .text("ok")
        }
    }

    /// A manager with `monitor` that retries a 503 at once.
    private func retryingManager(_ monitor: RecordingMonitor) -> URLSessionManager {
        let manager = manager([monitor])
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        return manager
    }

    /// What a task retried once after a 503 reports, however its body is taken.
    private static let retriedOnce = [
        "create", "resume", "send GET /flaky", "receive 503", "retry", "send GET /flaky", "receive 200",
        "metrics 2", "complete ok", "produce ok",
    ]

    func testARetryIsReportedBeforeItsAttempt() async throws {
        routeFlaky()
        let monitor = RecordingMonitor()
        let task = retryingManager(monitor).dataTask(with: URLRequest(url: try server.url("/flaky")), completionHandler: { _ in })
        try await run(task, monitor)
        XCTAssertEqual(monitor.lines(for: task), Self.retriedOnce)
        assertPlacedRight(monitor)
    }

    /// A failure held back from a stream while the retrier decides (`bytes(for:)` returns at
    /// the head; `StreamRetryTests`) is reported as a collected one is: its response, then
    /// the retry. (It was not: a monitor saw a retry with no response before it.)
    func testAFailureHeldFromAStreamIsReportedBeforeItsRetry() async throws {
        routeFlaky()
        let monitor = RecordingMonitor()
        let (bytes, head) = try await retryingManager(monitor).bytes(for: URLRequest(url: try server.url("/flaky")))
        var body = Data()
        for try await chunk in bytes { body += chunk }
        XCTAssertEqual(head.statusCode, 200)
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "ok")
        let lines = try await linesOfOnlyTask(monitor)
        XCTAssertEqual(lines, Self.retriedOnce)
        assertPlacedRight(monitor)
    }

    /// The same for a data handler's task: the 503 is held from the handler, and reported.
    func testAFailureHeldFromADataHandlerIsReportedBeforeItsRetry() async throws {
        routeFlaky()
        let monitor = RecordingMonitor()
        let received = Mutex(Data())
        let task = retryingManager(monitor).dataTask(
            with: URLRequest(url: try server.url("/flaky")), dataHandler: { chunk in received.withLock { $0 += chunk } },
            completionHandler: { _ in })
        try await run(task, monitor)
        XCTAssertEqual(monitor.lines(for: task), Self.retriedOnce)
        XCTAssertEqual(String(decoding: received.withLock { $0 }, as: UTF8.self), "ok", "the handler saw the 503's body")
        assertPlacedRight(monitor)
    }

    /// A held failure whose body then stalls past the timeout, with a retrier that declines:
    /// the task ends with the 503 and `.timedOut`, and the monitors hear the 503, as they hear
    /// a collected task's at its head. (They did not: a held head was reported only when the
    /// task ended without an error.)
    func testAHeldFailureThatEndsInAnErrorIsReported() async throws {
        let stalled = try ScriptedServer(connections: 2) { socket, server in
            guard server.readHead(socket) != nil else { return }
            _ = server.write(socket, "HTTP/1.1 503 Busy\r\nContent-Length: 100\r\n\r\nbusy")
            while server.readSome(socket) {}  // the rest never comes
        }
        defer { stalled.stop() }
        let monitor = RecordingMonitor()
        let manager = manager([monitor])
        manager.requestRetrier = FixedRetrier(decision: .doNotRetry)  // asked, never retries: the 503 is held for it
        var request = URLRequest(url: try XCTUnwrap(URL(string: "http://127.0.0.1:\(stalled.port)/busy")))
        request.timeoutInterval = 1
        let task = manager.dataTask(with: request, dataHandler: { _ in }, completionHandler: { _ in })
        try await run(task, monitor)
        XCTAssertEqual(task.response?.statusCode, 503)
        XCTAssertEqual(
            monitor.lines(for: task),
            ["create", "resume", "send GET /busy", "receive 503", "metrics 1", "complete timedOut", "produce timedOut"])
        assertPlacedRight(monitor)
    }

    /// A response withheld at its head — a 401 put to the challenge handler, a redirect — whose
    /// body then stalls past the timeout: the task ends with that head as its `response` and
    /// the timeout, and the monitors hear the head before the completion, as they hear a
    /// delivered one's.
    func testAWithheldResponseThatEndsInAnErrorIsReported() async throws {
        let heads = [
            "HTTP/1.1 401 No\r\nWWW-Authenticate: Basic realm=\"r\"\r\n",
            "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\n",
        ]
        for head in heads {
            let stalled = try ScriptedServer(connections: 1) { socket, server in
                guard server.readHead(socket) != nil else { return }
                _ = server.write(socket, head + "Content-Length: 100\r\n\r\nnope")
                while server.readSome(socket) {}  // the rest never comes
            }
            defer { stalled.stop() }
            let monitor = RecordingMonitor()
            let manager = manager([monitor])
            manager.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling }  // the 401 is withheld for it
            var request = URLRequest(url: try XCTUnwrap(URL(string: "http://127.0.0.1:\(stalled.port)/held")))
            request.timeoutInterval = 1
            let task = manager.dataTask(with: request, completionHandler: { _ in })
            try await run(task, monitor)
            let status = try XCTUnwrap(task.response?.statusCode, head)
            XCTAssertEqual(
                monitor.lines(for: task),
                ["create", "resume", "send GET /held", "receive \(status)", "metrics 1", "complete timedOut", "produce timedOut"],
                head)
            assertPlacedRight(monitor)
        }
    }

    /// A 401 the challenge handler answers is the first attempt's response: the monitors hear
    /// it before the attempt that sends the credential, as every attempt's `willSend` is
    /// followed by its response.
    func testAnAnsweredChallengeIsReportedBeforeTheResend() async throws {
        server.route("/private") { request in
            request.header("Authorization") == nil
                ? TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], body: Data("who?".utf8))
                : .text("hello")
        }
        let monitor = RecordingMonitor()
        let manager = manager([monitor])
        manager.setAuthenticationChallengeHandler { _, _ in
            .useCredential(URLCredential(user: "user", password: "secret", persistence: .none))
        }
        let task = manager.dataTask(with: URLRequest(url: try server.url("/private")), completionHandler: { _ in })
        try await run(task, monitor)
        XCTAssertEqual(task.response?.statusCode, 200)
        XCTAssertEqual(
            monitor.lines(for: task),
            ["create", "resume", "send GET /private", "receive 401", "send GET /private", "receive 200", "metrics 2",
             "complete ok", "produce ok"])
        assertPlacedRight(monitor)
    }

    /// The lines of the one task `monitor` has heard of (a call that makes its own task, like
    /// `bytes(for:)`), once it has seen that task's `didProduce`.
    private func linesOfOnlyTask(_ monitor: RecordingMonitor) async throws -> [String] {
        func lines() -> [String] { monitor.allEntries.filter { $0.task != nil }.map(\.line) }
        for _ in 0..<3000 where !(lines().last?.hasPrefix("produce") ?? false) {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        XCTAssertEqual(Set(monitor.allEntries.compactMap(\.task)).count, 1)
        return lines()
    }

    func testADownloadIsProducedOnceItsFileIsInPlace() async throws {
        server.route("/file", response: TestResponse(status: 200, body: Data(repeating: 7, count: 100_000)))
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("monitor-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let fileThere = Mutex<Bool?>(nil)
        let monitor = RecordingMonitor { entry in
            if entry.line.hasPrefix("produce") {
                fileThere.withLock { $0 = FileManager.default.fileExists(atPath: destination.path) }
            }
        }
        let manager = manager([monitor])
        let task = manager.downloadTask(
            with: URLRequest(url: try server.url("/file")), destination: { _, _ in destination }, completionHandler: { _ in })
        try await run(task, monitor)
        XCTAssertEqual(
            monitor.lines(for: task),
            ["create", "resume", "send GET /file", "receive 200", "metrics 1", "complete ok", "produce ok"])
        XCTAssertEqual(fileThere.withLock { $0 }, true, "didProduce comes once the file is at its destination")
        assertPlacedRight(monitor)
    }

    func testAResponseFromTheCacheIsReportedWithoutASend() async throws {
        server.route("/cached", response: TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data("v1".utf8)))
        var configuration = SessionConfiguration.default
        configuration.responseCache = ResponseCache()
        let monitor = RecordingMonitor()
        let manager = manager([monitor], configuration)
        let first = manager.dataTask(with: URLRequest(url: try server.url("/cached")), completionHandler: { _ in })
        try await run(first, monitor)
        let second = manager.dataTask(with: URLRequest(url: try server.url("/cached")), completionHandler: { _ in })
        try await run(second, monitor)
        XCTAssertEqual(server.requests.filter { $0.path == "/cached" }.count, 1, "the second answered from the cache")
        XCTAssertEqual(
            monitor.lines(for: second), ["create", "resume", "receive 200", "metrics 0", "complete ok", "produce ok"])
        assertPlacedRight(monitor)
    }

    func testACompositeAndSeveralMonitorsEachSeeEveryEventInOrder() async throws {
        let first = RecordingMonitor(label: "test.first")
        let second = RecordingMonitor(label: "test.second")
        let third = RecordingMonitor(label: "test.third")
        let manager = manager([first, CompositeEventMonitor(monitors: [second, third])])
        XCTAssertEqual(manager.eventMonitors.count, 2)
        XCTAssertTrue(manager.eventMonitors.first as? RecordingMonitor === first, "listed in the order given")
        let task = manager.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: { _ in })
        task.resume()
        for monitor in [first, second, third] { try await waitForProduce(task, monitor) }
        let expected = ["create", "resume", "send GET /ok", "receive 200", "metrics 1", "complete ok", "produce ok"]
        for monitor in [first, second, third] {
            XCTAssertEqual(monitor.lines(for: task), expected)
            assertPlacedRight(monitor)
        }
    }

    /// Starts `count` GETs of `/ok` at once on `manager` and waits for their handlers: their
    /// identifiers, and weak references to see them released.
    private func runAtOnce(_ count: Int, on manager: URLSessionManager) async throws -> ([Int], [WeakTask]) {
        let done = expectation(description: "every handler ran")
        done.expectedFulfillmentCount = count
        var identifiers: [Int] = []
        var released: [WeakTask] = []
        for _ in 0..<count {
            let task = manager.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: { _ in done.fulfill() })
            identifiers.append(task.taskIdentifier)
            released.append(WeakTask(task))
            task.resume()
        }
        await fulfillment(of: [done], timeout: 60)
        return (identifiers, released)
    }

    /// Many tasks at once, two monitors on their own queues (one taking Foundation responses,
    /// one the head): every task's events reach each monitor once and in order, and once
    /// delivered no monitor list keeps a task alive.
    func testManyConcurrentTasksReachEachMonitorInOrderAndAreReleased() async throws {
        let foundation = RecordingMonitor(label: "test.many.foundation")
        let heads = RecordingMonitor(label: "test.many.heads", foundationResponses: false)
        let manager = manager([foundation, heads])
        let count = 100
        let (identifiers, released) = try await runAtOnce(count, on: manager)
        for monitor in [foundation, heads] {
            try await eventually(
                { monitor.allEntries.filter { $0.line.hasPrefix("produce") }.count == count }, "every task produced")
        }
        let received = ["receive 200", "head 200"]
        for (monitor, receive) in zip([foundation, heads], received) {
            let entries = monitor.allEntries
            for identifier in identifiers {
                let lines = entries.filter { $0.task == identifier }.map { $0.line.hasPrefix("head 200 ") ? "head 200" : $0.line }
                XCTAssertEqual(lines, ["create", "resume", "send GET /ok", receive, "metrics 1", "complete ok", "produce ok"])
            }
            assertPlacedRight(monitor)
        }
        try await eventually({ released.allSatisfy { $0.task == nil } }, "no task kept alive once its events were delivered")
    }

    /// A monitor on a concurrent queue gets every event of every task exactly once, in the order
    /// they happened, and no task is kept alive. Deliveries ran side by side on such a queue,
    /// and one task's events came out of order (the order was kept only within a delivery).
    func testAMonitorOnAConcurrentQueueGetsEveryEventOnce() async throws {
        // A slow monitor (1 ms per event), so that deliveries overlap (two at once, counted
        // while writing this test); sharing a list between a delivery and new events crashed it.
        let monitor = RecordingMonitor(label: "test.concurrent", foundationResponses: false, concurrent: true) { _ in usleep(1_000) }
        let manager = manager([monitor])
        let count = 100
        let (identifiers, released) = try await runAtOnce(count, on: manager)
        try await eventually({ monitor.allEntries.filter { $0.line.hasPrefix("produce") }.count == count }, "every task produced")
        let entries = monitor.allEntries
        for identifier in identifiers {
            let lines = entries.filter { $0.task == identifier }.map { $0.line.hasPrefix("head 200 ") ? "head 200" : $0.line }
            XCTAssertEqual(lines, ["create", "resume", "send GET /ok", "head 200", "metrics 1", "complete ok", "produce ok"])
        }
        try await eventually({ released.allSatisfy { $0.task == nil } }, "no task kept alive once its events were delivered")
    }

    /// The same through a composite: it forwards each event as a block of its own, and on a
    /// concurrent queue those ran side by side, out of order.
    func testACompositesMonitorOnAConcurrentQueueGetsEventsInOrder() async throws {
        let child = RecordingMonitor(label: "test.composite.concurrent", foundationResponses: false, concurrent: true)
        let manager = manager([CompositeEventMonitor(monitors: [SlowToStartMonitor(child)])])
        let count = 50
        let (identifiers, _) = try await runAtOnce(count, on: manager)
        try await eventually({ child.allEntries.filter { $0.line.hasPrefix("produce") }.count == count }, "every task produced")
        let entries = child.allEntries
        for identifier in identifiers {
            let lines = entries.filter { $0.task == identifier }.map { $0.line.hasPrefix("head 200 ") ? "head 200" : $0.line }
            XCTAssertEqual(lines, ["create", "resume", "send GET /ok", "head 200", "metrics 1", "complete ok", "produce ok"])
        }
    }

    /// Tasks resumed while a reset waited are completed when the manager is invalidated for
    /// good instead: the invalidation is still the last event. It was emitted at once, and the
    /// tasks' completions, queued for the completion queue (a download's through the operation
    /// queue first), were heard after it.
    func testTheInvalidationComesAfterTheCompletionsOfTasksAResetHeld() async throws {
        let gate = DispatchSemaphore(value: 0)
        server.route("/held") { _ in
            _ = gate.wait(timeout: .now() + 30)
            return .text("ok")
        }
        let monitor = RecordingMonitor()
        let manager = manager([monitor])
        let old = manager.dataTask(with: URLRequest(url: try server.url("/held")), completionHandler: { _ in })
        old.resume()
        try await eventually({ server.requests.count == 1 }, "the old task holds the reset")
        manager.invalidateSessionCancelingTasks(false, resetSession: true)  // waits for `old`
        let parked = manager.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: { _ in })
        parked.resume()
        let parkedDownload = manager.downloadTask(with: URLRequest(url: try server.url("/ok")), destination: nil) { _ in }
        parkedDownload.resume()
        // Waiting for the invalidation ends the manager for good: the parked tasks are refused.
        let invalidated = expectation(description: "invalidated")
        manager.engine.invalidate(cancelingTasks: false) { invalidated.fulfill() }
        gate.signal()
        await fulfillment(of: [invalidated], timeout: 30)
        try await eventually({ monitor.allEntries.contains { $0.line == "invalidate" } }, "managerDidInvalidate")
        try await waitForProduce(parked, monitor)
        try await waitForProduce(parkedDownload, monitor)
        XCTAssertEqual(parked.error as? SessionError, .sessionInvalidated)
        XCTAssertEqual(parkedDownload.error as? SessionError, .sessionInvalidated)
        XCTAssertEqual(monitor.allEntries.last?.line, "invalidate", "\(monitor.allEntries.map(\.line))")
    }

    /// A manager released right after `waitUntilInvalidated()` still has its
    /// `managerDidInvalidate` delivered (the event holds the manager until then).
    func testAManagerReleasedRightAfterInvalidationIsStillReported() async throws {
        let monitor = RecordingMonitor(label: "test.released")
        var manager: URLSessionManager? = URLSessionManager(configuration: .default, eventMonitors: [monitor])
        manager?.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager?.waitUntilInvalidated()
        manager = nil
        try await eventually({ monitor.allEntries.contains { $0.line == "invalidate" } }, "managerDidInvalidate arrived")
    }

    func testABlockedMonitorDoesNotHoldUpTransfers() async throws {
        let gate = DispatchSemaphore(value: 0)
        let blocked = BlockingMonitor(gate: gate)
        let recorder = RecordingMonitor()
        let manager = manager([blocked, recorder])
        let count = 20
        let done = expectation(description: "every transfer completed")
        done.expectedFulfillmentCount = count
        var tasks: [SessionTask] = []
        for _ in 0..<count {
            let task = manager.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: { response in
                if response.error == nil { done.fulfill() }
            })
            tasks.append(task)
            task.resume()
        }
        // The blocked monitor is stuck in its first event the whole time.
        await fulfillment(of: [done], timeout: 60)
        XCTAssertEqual(blocked.seen.withLock { $0.count }, 1, "still blocked in its first event")
        // Nor does it hold up the other monitor.
        try await eventually(
            { recorder.allEntries.filter { $0.line.hasPrefix("produce") }.count == count }, "the other monitor saw every task")
        gate.signal()
        let perTask = 7
        try await eventually({ blocked.seen.withLock { $0.count } == count * perTask }, "the released monitor sees every event")
        for task in tasks {
            let lines = blocked.seen.withLock { $0.filter { $0.task == task.taskIdentifier }.map(\.line) }
            XCTAssertEqual(lines, ["create", "resume", "send", "receive", "metrics", "complete", "produce"])
        }
    }
}

/// A monitor whose queue is blocked in its first event until `gate` is signalled.
final class BlockingMonitor: EventMonitor {
    let queue = DispatchQueue(label: "test.blocking-monitor")
    let gate: DispatchSemaphore
    let seen = Mutex<[(task: Int, line: String)]>([])

    init(gate: DispatchSemaphore) { self.gate = gate }

    private func note(_ task: SessionTask, _ line: String) {
        let first = seen.withLock { seen -> Bool in
            seen.append((task.taskIdentifier, line))
            return seen.count == 1
        }
        if first { gate.wait() }
    }

    func taskDidCreate(_ task: SessionTask) { note(task, "create") }
    func taskDidResume(_ task: SessionTask) { note(task, "resume") }
    func task(_ task: SessionTask, willSend request: URLRequest) { note(task, "send") }
    func task(_ task: SessionTask, didReceive response: HTTPURLResponse) { note(task, "receive") }
    func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) { note(task, "metrics") }
    func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) { note(task, "complete") }
    func task(_ task: SessionTask, didProduce response: DataResponse) { note(task, "produce") }
}

/// A weak reference to a task, for release checks.
final class WeakTask {
    weak var task: SessionTask?
    init(_ task: SessionTask) { self.task = task }
}

/// Forwards a task's events to `recorder` after a pause of 2 ms before every other event, on
/// the recorder's concurrent queue: two events forwarded as blocks of their own then run side
/// by side, and the second is recorded first unless something keeps them in order.
final class SlowToStartMonitor: EventMonitor, Sendable {
    let recorder: RecordingMonitor
    private let count = Mutex(0)

    init(_ recorder: RecordingMonitor) { self.recorder = recorder }

    var queue: DispatchQueue { recorder.queue }
    var receivesFoundationResponses: Bool { false }

    private func pause() {
        let slow = count.withLock { value -> Bool in
            value += 1
            return value % 2 == 1
        }
        if slow { usleep(2_000) }
    }

    func taskDidCreate(_ task: SessionTask) { pause(); recorder.taskDidCreate(task) }
    func taskDidResume(_ task: SessionTask) { pause(); recorder.taskDidResume(task) }
    func task(_ task: SessionTask, willSend request: URLRequest) { pause(); recorder.task(task, willSend: request) }
    func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) { pause(); recorder.task(task, didReceiveHead: head) }
    func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) { pause(); recorder.task(task, didFinishCollecting: metrics) }
    func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) { pause(); recorder.task(task, didCompleteWithError: error) }
    func task(_ task: SessionTask, didProduce response: DataResponse) { pause(); recorder.task(task, didProduce: response) }
}
