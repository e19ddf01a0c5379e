import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Pairs of features checked together (issue 19's seams): the idle clock against the waits
/// for user code, the connection cap against cancel and cross-origin redirects.
final class FeatureSeamTests: XCTestCase {
    var server: TestServer!

    override func setUp() async throws {
        server = try TestServer()
        server.route("/ok", response: .text("ok"))
        server.route("/busy", response: .stream((0..<20).map { _ in .init(Data(repeating: 7, count: 64), delay: .milliseconds(100)) }))
    }

    override func tearDown() async throws {
        server.shutdown()
    }

    private func manager(_ change: (inout SessionConfiguration) -> Void = { _ in }) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        change(&configuration)
        return URLSessionManager.raw(configuration)
    }

    private func shortTimeout(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.timeoutInterval = 0.5
        return request
    }

    /// `/busy` (2 s of body) takes the one connection slot of `manager`'s origin; the task
    /// returned for `/ok` (not resumed yet) will wait in line behind it.
    private func taskInLine(_ manager: URLSessionManager) throws -> (busy: DataTask, waiting: DataTask, done: XCTestExpectation) {
        let busy = manager.dataTask(with: URLRequest(url: try server.url("/busy"))) { _ in }
        busy.resume()
        XCTAssertTrue(server.waitForRequests(count: 1))
        let waiting = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in }
        return (busy, waiting, expectation(forNotification: .taskDidComplete, object: waiting))
    }

    /// Idle clock × challenge handler: the handler's time (longer than the idle timeout) is
    /// not the server's silence.
    func testASlowChallengeHandlerIsNotIdleTime() async throws {
        server.route("/private") { request in
            if request.headers.contains(where: { $0.name.lowercased() == "authorization" }) { return .text("secret") }
            return TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")])
        }
        let manager = manager()
        manager.setAuthenticationChallengeHandler { _, _ in
            Thread.sleep(forTimeInterval: 1)  // twice the idle timeout
            return .useCredential(URLCredential(user: "u", password: "p", persistence: .none))
        }
        let response = await manager.response(for: shortTimeout(try server.url("/private")))
        XCTAssertNil(response.error, "the handler's time counted as idle: \(String(describing: response.error))")
        XCTAssertEqual(response.data, Data("secret".utf8))
    }

    /// Idle clock × redirect hook: the same.
    func testASlowRedirectHookIsNotIdleTime() async throws {
        server.route("/moved", response: .redirect(to: "/ok"))
        let manager = manager()
        manager.setTaskWillPerformHTTPRedirectionBlock { _, _, request in
            Thread.sleep(forTimeInterval: 1)
            return request
        }
        let response = await manager.response(for: shortTimeout(try server.url("/moved")))
        XCTAssertNil(response.error, "the hook's time counted as idle: \(String(describing: response.error))")
        XCTAssertEqual(response.data, Data("ok".utf8))
    }

    /// Connection cap × cancel: a task cancelled while it waits for a slot completes with
    /// `.cancelled`, and the slot accounting stays whole (later requests still run).
    func testCancellingATaskWaitingForASlotKeepsTheLineWhole() async throws {
        let manager = manager { $0.httpMaximumConnectionsPerHost = 1 }
        let (busy, waiting, waitingDone) = try taskInLine(manager)
        waiting.resume()
        waiting.cancel()
        await fulfillment(of: [waitingDone], timeout: 30)
        XCTAssertEqual(waiting.error as? SessionError, .cancelled)
        for _ in 0..<3 {
            let next = await manager.response(for: URLRequest(url: try server.url("/ok")))
            XCTAssertNil(next.error)
        }
        XCTAssertEqual(busy.state, .completed)
        XCTAssertEqual(server.requests.map(\.path), ["/busy", "/ok", "/ok", "/ok"], "the cancelled task sent nothing")
    }

    /// Connection cap × redirect: a redirect to another origin gives the first origin's slot
    /// up (the transfer now counts against the second origin).
    func testARedirectToAnotherOriginGivesUpTheFirstOriginsSlot() async throws {
        let other = try TestServer()
        defer { other.shutdown() }
        other.route("/busy", response: .stream((0..<20).map { _ in .init(Data(repeating: 7, count: 64), delay: .milliseconds(100)) }))
        server.route("/away", response: .redirect(to: try other.url("/busy").absoluteString))
        let manager = manager { $0.httpMaximumConnectionsPerHost = 1 }
        let away = manager.dataTask(with: URLRequest(url: try server.url("/away"))) { _ in }
        let awayDone = expectation(forNotification: .taskDidComplete, object: away)
        away.resume()
        XCTAssertTrue(other.waitForRequests(count: 1))
        let response = await manager.response(for: URLRequest(url: try server.url("/ok")))
        XCTAssertNil(response.error)
        XCTAssertNotEqual(away.state, .completed, "the request to the first origin waited for the whole redirect chain")
        await fulfillment(of: [awayDone], timeout: 30)
        XCTAssertNil(away.error)
    }

    /// Idle clock × response hook × suspend: a hook that suspends its task before allowing it
    /// leaves no hold behind. Once resumed, a server that stalls mid-body (3 s) times the task
    /// out after its 0.5 s idle timeout instead of waiting for the rest.
    func testAResponseHookThatSuspendsItsTaskLeavesTheIdleClockRunningAfterResume() async throws {
        server.route("/stall", response: .stream([
            .init(Data(repeating: 1, count: 64)),
            .init(Data(repeating: 2, count: 64), delay: .seconds(3)),
        ]))
        let manager = manager()
        manager.setDataTaskDidReceiveResponseBlock { task, _ in
            task.suspend()
            return .allow
        }
        let task = manager.dataTask(with: shortTimeout(try server.url("/stall"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        for _ in 0..<500 where task.state != .suspended { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(task.state, .suspended)
        try await Task.sleep(nanoseconds: 100_000_000)  // let the hook's answer reach the driver
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        guard case .timedOut? = task.error as? SessionError else {
            return XCTFail("the stalled body was waited for: \(String(describing: task.error))")
        }
    }

    /// Idle clock × backpressure × suspend: the consumer catches up while the task is
    /// suspended; after `resume()` no backpressure hold is left, so a server that stalls
    /// mid-body (3 s) times the task out after its 0.5 s idle timeout.
    func testBackpressureThatEndsWhileSuspendedLeavesTheIdleClockRunningAfterResume() async throws {
        let chunk = Data(repeating: 3, count: 256 << 10)
        server.route("/plenty", response: .stream(
            Array(repeating: TestResponse.Chunk(chunk), count: 40)  // 10 MiB at once, then a stall
                + [TestResponse.Chunk(chunk, delay: .seconds(3))]))
        let manager = manager()
        let consumerMayGo = DispatchSemaphore(value: 0)
        let blocked = Mutex(false)
        let task = manager.dataTask(with: shortTimeout(try server.url("/plenty")), dataHandler: { _ in
            let first = blocked.withLock { wasBlocked -> Bool in
                defer { wasBlocked = true }
                return !wasBlocked
            }
            // The first chunk holds the consumer (bounded) until the task is suspended.
            if first { _ = consumerMayGo.wait(timeout: .now() + 10) }
        }, completionHandler: nil)
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        // About the 4 MiB of credit waits in the held consumer: backpressure paused it. (The
        // credit charges a small chunk 256 bytes, so the pause can come a little before 4 MiB
        // of body: the margin is one chunk of the server's, far more than that.)
        let paused = (4 << 20) - (256 << 10)
        for _ in 0..<1000 where task.countOfBytesReceived < paused { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertGreaterThanOrEqual(task.countOfBytesReceived, Int64(paused))
        task.suspend()
        consumerMayGo.signal()  // the consumer drains while the task is suspended
        try await Task.sleep(nanoseconds: 200_000_000)  // let the drain reach the driver (not a timing assertion)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        guard case .timedOut? = task.error as? SessionError else {
            return XCTFail("the stalled body was waited for: \(String(describing: task.error))")
        }
    }

    /// Redirect × retry × adapter: after a redirect to another origin, a retry prepared from
    /// the adapter's request still leaves the configuration's credentials behind.
    func testARetryAfterACrossOriginRedirectSendsNoConfiguredCredentials() async throws {
        let other = try TestServer()
        defer { other.shutdown() }
        other.routeAnsweringFirst("/b", with: TestResponse(status: 503), thenWith: .text("b"))
        server.route("/a", response: .redirect(to: try other.url("/b").absoluteString))
        let manager = manager { $0.httpAdditionalHeaders = ["Authorization": "Bearer configured-secret"] }
        manager.requestAdapter = UnchangedRequest()
        manager.requestRetrier = FixedRetrier(decision: .retry)
        let response = await manager.response(for: URLRequest(url: try server.url("/a")))
        XCTAssertNil(response.error)
        XCTAssertEqual(response.data, Data("b".utf8))
        XCTAssertEqual(other.requests.count, 2)
        for request in other.requests {
            XCTAssertFalse(
                request.headers.contains { $0.name.lowercased() == "authorization" },
                "the other origin received the configured credentials")
        }
        XCTAssertTrue(server.requests.first?.headers.contains { $0.name.lowercased() == "authorization" } ?? false)
    }

    /// Retry × suspend: a task the caller suspends while its retry waits out the back-off
    /// sends nothing when the back-off ends, only once resumed (a suspended task produces no
    /// traffic). A second task whose back-off is ten times longer marks the time: when its
    /// retry reaches the server, the first one's back-off is long over.
    func testASuspendedTaskSendsItsRetryOnlyOnceResumed() async throws {
        server.routeAnsweringFirst("/first", with: TestResponse(status: 503), thenWith: .text("first"))
        server.routeAnsweringFirst("/marker", with: TestResponse(status: 503), thenWith: .text("marker"))
        let manager = manager()
        manager.requestRetrier = SuspendingRetrier()
        let first = manager.dataTask(with: URLRequest(url: try server.url("/first"))) { _ in }
        let firstDone = expectation(forNotification: .taskDidComplete, object: first)
        first.resume()
        XCTAssertTrue(server.waitForRequests(count: 1))
        let marker = await manager.response(for: URLRequest(url: try server.url("/marker")))
        XCTAssertEqual(marker.data, Data("marker".utf8))
        XCTAssertEqual(first.state, .suspended)
        XCTAssertEqual(
            server.requests.map(\.path), ["/first", "/marker", "/marker"],
            "the suspended task's retry was sent when its back-off ended")
        first.resume()
        await fulfillment(of: [firstDone], timeout: 30)
        XCTAssertNil(first.error)
        XCTAssertEqual(server.requests.map(\.path), ["/first", "/marker", "/marker", "/first"])
    }

    /// Redirect hook × suspend: a hook that suspends its task and lets the redirect go on
    /// sends the next hop only once the task is resumed.
    func testARedirectFollowedWhileSuspendedIsSentOnlyOnceResumed() async throws {
        server.route("/moved", response: .redirect(to: "/ok"))
        let manager = manager()
        let hookReturned = Mutex(false)
        manager.setTaskWillPerformHTTPRedirectionBlock { task, _, request in
            guard request.url?.path == "/ok" else { return request }
            task.suspend()
            hookReturned.withLock { $0 = true }
            return request
        }
        let moved = manager.dataTask(with: URLRequest(url: try server.url("/moved"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: moved)
        moved.resume()
        for _ in 0..<1000 where !hookReturned.withLock({ $0 }) { try await Task.sleep(nanoseconds: 10_000_000) }
        // A whole exchange of another task after the hook answered: the driver handled the
        // answer before it.
        var probe = URLRequest(url: try server.url("/ok"))
        probe.setValue("probe", forHTTPHeaderField: "X-Probe")
        let other = await manager.response(for: probe)
        XCTAssertNil(other.error)
        XCTAssertEqual(server.requests.count, 2, "the next hop was sent while the task was suspended")
        moved.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertNil(moved.error)
        XCTAssertEqual(server.requests.map(\.path), ["/moved", "/ok", "/ok"])
        XCTAssertNil(server.requests[2].headers.first { $0.name == "X-Probe" }, "the last request is the redirect's hop")
    }

    /// A manager whose adapter suspends the task for `/busy` before it starts, that task
    /// (resumed, and suspended by the adapter), and the expectation of its completion.
    private func taskSuspendedBeforeItStarted() async throws -> (URLSessionManager, DataTask, XCTestExpectation) {
        let manager = manager()
        manager.requestAdapter = SuspendingAdapter(path: "/busy")
        let task = manager.dataTask(with: URLRequest(url: try server.url("/busy"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        for _ in 0..<1000 where task.state != .suspended { try await Task.sleep(nanoseconds: 10_000_000) }
        return (manager, task, done)
    }

    /// Start × suspend: a task suspended after `resume()` but before the driver started it
    /// (here by the adapter, which runs in between) sends nothing until resumed again;
    /// another task's whole exchange meanwhile shows the driver got to it.
    func testATaskSuspendedBeforeItStartedSendsNothingUntilResumed() async throws {
        let (manager, early, done) = try await taskSuspendedBeforeItStarted()
        let other = await manager.response(for: URLRequest(url: try server.url("/ok")))
        XCTAssertNil(other.error)
        XCTAssertEqual(server.requests.map(\.path), ["/ok"], "the suspended task's request was sent")
        early.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertNil(early.error)
        XCTAssertEqual(early.countOfBytesReceived, 20 * 64)
        XCTAssertEqual(server.requests.map(\.path), ["/ok", "/busy"])
    }

    /// Resource timeout × suspend: a task held for its resume still ends at its resource
    /// timeout (the total time a task may take, suspended or not), having sent nothing.
    func testATaskHeldForItsResumeEndsAtItsResourceTimeout() async throws {
        let manager = manager { $0.timeoutIntervalForResource = 0.5 }
        manager.requestAdapter = SuspendingAdapter(path: "/ok")
        let held = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: held)
        held.resume()
        await fulfillment(of: [done], timeout: 30)
        guard case .timedOut(let reason)? = held.error as? SessionError else {
            return XCTFail("expected the resource timeout, got \(String(describing: held.error))")
        }
        XCTAssertTrue(reason.contains("resource timeout"), reason)
        XCTAssertEqual(server.requests.count, 0)
    }

    /// Cancel × suspend: a task held for its resume, cancelled, completes with `.cancelled`
    /// having sent nothing, and leaves nothing behind (the next requests run).
    func testCancellingATaskHeldForItsResumeSendsNothing() async throws {
        let (manager, held, done) = try await taskSuspendedBeforeItStarted()
        held.cancel()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(held.error as? SessionError, .cancelled)
        let next = await manager.response(for: URLRequest(url: try server.url("/ok")))
        XCTAssertNil(next.error)
        XCTAssertEqual(server.requests.map(\.path), ["/ok"])
    }

    /// Connection cap × suspend: a task suspended while it waits in line for its origin's
    /// only slot passes the slot on when its turn comes, and takes one when resumed.
    func testASuspendedTaskInLinePassesItsSlotOn() async throws {
        let manager = manager { $0.httpMaximumConnectionsPerHost = 1 }
        let (_, waiting, waitingDone) = try taskInLine(manager)
        waiting.resume()
        waiting.suspend()
        var request = URLRequest(url: try server.url("/ok"))
        request.setValue("behind", forHTTPHeaderField: "X-Probe")
        let behind = manager.dataTask(with: request) { _ in }
        let behindDone = expectation(forNotification: .taskDidComplete, object: behind)
        behind.resume()
        // Bounded: a suspended task that kept the slot would hold this one in line for good.
        await fulfillment(of: [behindDone], timeout: 30)
        XCTAssertNil(behind.error)
        XCTAssertEqual(server.requests.count, 2, "the suspended task's request was sent")
        waiting.resume()
        await fulfillment(of: [waitingDone], timeout: 30)
        XCTAssertNil(waiting.error)
        XCTAssertEqual(server.requests.map(\.path), ["/busy", "/ok", "/ok"])
        XCTAssertNil(server.requests[2].headers.first { $0.name == "X-Probe" })
    }
}

/// Suspends a task at its first failure and retries it after a short back-off; any other
/// task is retried after ten times as long. Later failures are not retried.
struct SuspendingRetrier: RequestRetrier {
    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        guard attempt == 0 else { return .doNotRetry }
        if task.currentRequest?.url?.path == "/first" {
            task.suspend()
            return .retryAfter(0.05)
        }
        return .retryAfter(0.5)
    }
}

/// Suspends the task of a request for `path` while adapting its first attempt: the task is
/// suspended after `resume()` and before the driver starts it, every time.
struct SuspendingAdapter: RequestAdapter {
    let path: String

    func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest {
        if attempt == 0, request.url?.path == path { task.suspend() }
        return request
    }
}

/// An adapter that changes nothing (its presence makes retries re-prepare the request).
struct UnchangedRequest: RequestAdapter {
    func adapt(_ request: URLRequest, attempt: Int) -> URLRequest { request }
}
