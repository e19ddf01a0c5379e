import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Where the connection limits meet the idle clock and the waits for user code (issue 19,
/// items 6 and 8): waiting for a connection is not the server's silence, and a transfer that
/// waits detached — a retry's back-off, the challenge handler, a redirect hook — leaves its
/// connection slot to the next transfer. No timing assertions: the order in which the server
/// sees requests, and whether a short-timeout request succeeds, tell.
final class ConnectionWaitTests: XCTestCase {
    var server: TestServer!

    override func setUp() async throws {
        server = try TestServer()
        // About 2 s of body, a chunk every 100 ms: the connection is busy, never silent.
        server.route("/busy", response: .stream((0..<20).map { _ in .init(Data(repeating: 7, count: 64), delay: .milliseconds(100)) }))
        server.route("/ok", response: .text("ok"))
    }

    override func tearDown() async throws {
        server.shutdown()
    }

    private func manager(_ change: (inout SessionConfiguration) -> Void) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        change(&configuration)
        return URLSessionManager.raw(configuration)
    }

    /// Starts `/busy` and waits until its request reached the server (it then holds the one
    /// connection the limits allow for about 2 s).
    private func occupyTheConnection(_ manager: URLSessionManager, url: URL) throws -> DataTask {
        let busy = manager.dataTask(with: URLRequest(url: url)) { _ in }
        busy.resume()
        XCTAssertTrue(server.waitForRequests(count: 1))
        return busy
    }

    /// A request with a 0.5 s idle timeout, which must outlast a wait of about 2 s for a
    /// connection (it fails "no byte moved" when the wait counts as silence).
    private func shortTimeoutRequest(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.timeoutInterval = 0.5
        return request
    }

    /// `httpMaximumConnections = 1`: the second transfer waits inside libcurl (under
    /// `CURLMOPT_MAX_TOTAL_CONNECTIONS`), not in Curlew's per-host line.
    func testWaitingUnderTheTotalConnectionLimitIsNotIdle() async throws {
        let manager = manager { $0.httpMaximumConnections = 1 }
        let busy = try occupyTheConnection(manager, url: try server.url("/busy"))
        let waiting = await manager.response(for: shortTimeoutRequest(try server.url("/ok")))
        XCTAssertNil(waiting.error, "waiting for the connection timed out: \(String(describing: waiting.error))")
        XCTAssertEqual(waiting.data, Data("ok".utf8))
        XCTAssertEqual(busy.state, .completed, "it could only start once /busy gave the connection up")
    }

    /// `httpMaximumConnectionsPerHost = 1` on http://: the second transfer waits in Curlew's
    /// own line for the origin's slot.
    func testWaitingForAPerHostSlotIsNotIdle() async throws {
        let manager = manager { $0.httpMaximumConnectionsPerHost = 1 }
        let busy = try occupyTheConnection(manager, url: try server.url("/busy"))
        let waiting = await manager.response(for: shortTimeoutRequest(try server.url("/ok")))
        XCTAssertNil(waiting.error, "waiting for the slot timed out: \(String(describing: waiting.error))")
        XCTAssertEqual(busy.state, .completed)
    }

    /// https under the default `.http2` skips Curlew's per-host line (the connection may
    /// multiplex); against a server that speaks only HTTP/1.1, the extra transfer waits inside
    /// libcurl under `CURLMOPT_MAX_HOST_CONNECTIONS`. That wait is not idle either.
    func testWaitingInsideLibcurlForAnHTTP1TLSConnectionIsNotIdle() async throws {
        server.shutdown()
        let files = try TLSFixture.certificates().leaf
        server = try TestServer(
            tls: TestServerTLS(certificateChainPath: files.chainPEM.path, privateKeyPath: files.privateKeyPEM.path, applicationProtocols: ["http/1.1"]))
        server.route("/busy", response: .stream((0..<20).map { _ in .init(Data(repeating: 7, count: 64), delay: .milliseconds(100)) }))
        server.route("/ok", response: .text("ok"))
        let manager = manager {
            $0.httpMaximumConnectionsPerHost = 1
            $0.httpVersion = .http2
        }
        manager.securityPolicy = try TLSFixture.trustingTestRoot()
        let busy = try occupyTheConnection(manager, url: try server.url("/busy"))
        let waiting = await manager.response(for: shortTimeoutRequest(try server.url("/ok")))
        XCTAssertNil(waiting.error, "waiting inside libcurl timed out: \(String(describing: waiting.error))")
        XCTAssertEqual(waiting.data, Data("ok".utf8))
        XCTAssertEqual(busy.state, .completed)
        XCTAssertEqual(server.acceptedConnectionCount, 1, "one connection, shared in turn")
    }

    /// Item 8: a 503 with a 2 s back-off before its retry; a request to the same host made
    /// meanwhile goes first instead of waiting out the back-off behind the held slot.
    func testARetryBackOffHoldsNoConnectionSlot() async throws {
        server.routeAnsweringFirst("/flaky", with: TestResponse(status: 503), thenWith: .text("second"))
        let manager = manager { $0.httpMaximumConnectionsPerHost = 1 }
        manager.requestRetrier = FixedRetrier(decision: .retryAfter(2))
        let flaky = manager.dataTask(with: URLRequest(url: try server.url("/flaky"))) { _ in }
        let flakyDone = expectation(forNotification: .taskDidComplete, object: flaky)
        flaky.resume()
        XCTAssertTrue(server.waitForRequests(count: 1))

        let other = await manager.response(for: URLRequest(url: try server.url("/ok")))
        XCTAssertNil(other.error)
        XCTAssertNotEqual(flaky.state, .completed, "the other request finished while the retry waited")
        await fulfillment(of: [flakyDone], timeout: 30)
        XCTAssertNil(flaky.error)
        XCTAssertEqual(server.requests.map(\.path), ["/flaky", "/ok", "/flaky"])
    }

    /// The challenge handler's time holds no slot: a handler that waits for another request
    /// to the same host (bounded) sees it complete.
    func testAChallengeHandlerHoldsNoConnectionSlot() async throws {
        server.route("/private") { request in
            if request.headers.contains(where: { $0.name.lowercased() == "authorization" }) { return .text("secret") }
            return TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")])
        }
        let manager = manager { $0.httpMaximumConnectionsPerHost = 1 }
        let otherDone = DispatchSemaphore(value: 0)
        let sawOther = Mutex<Bool?>(nil)
        manager.setAuthenticationChallengeHandler { _, _ in
            // A hang guard, not a timing assertion: with the slot held this waits out 10 s.
            sawOther.withLock { $0 = otherDone.wait(timeout: .now() + 10) == .success }
            return .useCredential(URLCredential(user: "u", password: "p", persistence: .none))
        }
        let challenged = manager.dataTask(with: URLRequest(url: try server.url("/private"))) { _ in }
        let challengedDone = expectation(forNotification: .taskDidComplete, object: challenged)
        challenged.resume()
        XCTAssertTrue(server.waitForRequests(count: 1))
        let other = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in otherDone.signal() }
        other.resume()
        await fulfillment(of: [challengedDone], timeout: 30)
        XCTAssertEqual(sawOther.withLock { $0 }, true, "the other request waited for the handler's slot")
        XCTAssertNil(challenged.error)
    }

    /// The same for the redirection hook.
    func testARedirectHookHoldsNoConnectionSlot() async throws {
        server.route("/moved", response: .redirect(to: "/ok"))
        let manager = manager { $0.httpMaximumConnectionsPerHost = 1 }
        let otherDone = DispatchSemaphore(value: 0)
        let sawOther = Mutex<Bool?>(nil)
        manager.setTaskWillPerformHTTPRedirectionBlock { _, _, request in
            sawOther.withLock { $0 = otherDone.wait(timeout: .now() + 10) == .success }
            return request
        }
        let redirected = manager.dataTask(with: URLRequest(url: try server.url("/moved"))) { _ in }
        let redirectedDone = expectation(forNotification: .taskDidComplete, object: redirected)
        redirected.resume()
        XCTAssertTrue(server.waitForRequests(count: 1))
        let other = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in otherDone.signal() }
        other.resume()
        await fulfillment(of: [redirectedDone], timeout: 30)
        XCTAssertEqual(sawOther.withLock { $0 }, true, "the other request waited for the hook's slot")
        XCTAssertNil(redirected.error)
    }

    /// A task suspended while it waits for a slot stays suspended when the slot arrives: its
    /// idle clock stays stopped (the holds are separate) and it completes once resumed.
    func testASuspendedTaskWaitingForASlotIsNotTimedOut() async throws {
        let manager = manager { $0.httpMaximumConnectionsPerHost = 1 }
        let busy = try occupyTheConnection(manager, url: try server.url("/busy"))
        let waiting = manager.dataTask(with: shortTimeoutRequest(try server.url("/ok"))) { _ in }
        let waitingDone = expectation(forNotification: .taskDidComplete, object: waiting)
        waiting.resume()
        waiting.suspend()
        waiting.resume()
        waiting.suspend()
        let busyDone = expectation(forNotification: .taskDidComplete, object: busy)
        await fulfillment(of: [busyDone], timeout: 30)
        try await Task.sleep(nanoseconds: 700_000_000)  // longer than its idle timeout (not a timing assertion)
        XCTAssertNotEqual(waiting.state, .completed, "a suspended task timed out")
        waiting.resume()
        await fulfillment(of: [waitingDone], timeout: 30)
        XCTAssertNil(waiting.error)
    }
}

/// Item 7: timeouts reach the retrier like every other failed attempt.
final class TimeoutRetryTests: XCTestCase {
    var server: TestServer!

    override func setUp() async throws {
        server = try TestServer()
    }

    override func tearDown() async throws {
        server.shutdown()
    }

    private func silentThenOK() {
        server.routeAnsweringFirst("/sometimes", with: .fault(.acceptAndNeverRespond), thenWith: .text("answered"))
    }

    private func request(_ path: String) throws -> URLRequest {
        var request = URLRequest(url: try server.url(path))
        request.timeoutInterval = 0.5
        return request
    }

    /// `RetryPolicy()` retries a timed-out GET.
    func testRetryPolicyRetriesATimedOutAttempt() async throws {
        silentThenOK()
        let manager = URLSessionManager.raw()
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.05)
        let response = await manager.response(for: try request("/sometimes"))
        XCTAssertNil(response.error, "the timed-out attempt was not retried: \(String(describing: response.error))")
        XCTAssertEqual(response.data, Data("answered".utf8))
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(response.metrics?.transactionMetrics.count, 2, "the metrics list both attempts")
    }

    /// Docs/Usage.md's `RetryOnceOnTimeout`: asked with `.timedOut`, it sends the request a
    /// second time; the second timeout is delivered.
    func testACustomRetrierIsAskedAboutATimeout() async throws {
        server.route("/never", response: .fault(.acceptAndNeverRespond))
        let retrier = RecordingRetrier { attempt, error in
            if attempt == 0, case .timedOut? = error { return .retry }
            return .doNotRetry
        }
        let manager = URLSessionManager.raw()
        manager.requestRetrier = retrier
        let response = await manager.response(for: try request("/never"))
        guard case .timedOut? = response.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: response.error))")
        }
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(retrier.asked.withLock { $0 }, ["0 timedOut", "1 timedOut"])
    }

    /// The resource timeout ends the task, retries included: the retrier is not asked.
    func testTheResourceTimeoutIsNotRetried() async throws {
        server.route("/never", response: .fault(.acceptAndNeverRespond))
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForResource = 0.5
        let retrier = RecordingRetrier { _, _ in .retry }
        let manager = URLSessionManager.raw(configuration)
        manager.requestRetrier = retrier
        let response = await manager.response(for: URLRequest(url: try server.url("/never")))
        guard case .timedOut? = response.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: response.error))")
        }
        XCTAssertEqual(retrier.asked.withLock { $0 }, [])
    }
}

/// Records what it was asked ("attempt errorCase") and answers with `decide`.
final class RecordingRetrier: RequestRetrier {
    let asked = Mutex<[String]>([])
    let decide: @Sendable (Int, SessionError?) -> RetryDecision

    init(decide: @escaping @Sendable (Int, SessionError?) -> RetryDecision) {
        self.decide = decide
    }

    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        asked.withLock { $0.append("\(attempt) \(error.map { caseName(of: $0) } ?? "response")") }
        return decide(attempt, error)
    }
}
