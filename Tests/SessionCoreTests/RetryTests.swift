import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `requestRetrier` and `RetryPolicy`: a failed attempt is sent again on the same task, whose
/// handlers are called once.
final class RetryTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!

    /// Fast waits, no jitter: the tests never depend on how long a wait takes.
    let quick = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)

    override func setUp() async throws {
        manager = URLSessionManager.raw()
        server = try TestServer()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
    }

    /// Fails with `status` the first `failures` times, then answers "ok".
    private func flaky(_ path: String, failures: Int, status: Int = 503, headers: [(name: String, value: String)] = []) {
        let count = Mutex(0)
        server.route(path) { _ in
            let attempt = count.withLock { value -> Int in
                value += 1
                return value
            }
            return attempt <= failures ? TestResponse(status: status, headers: headers, body: Data("busy".utf8)) : .text("ok")
        }
    }

    private func hits(_ path: String) -> Int { server.requests.filter { $0.path == path }.count }

    func testA503IsRetriedOnTheSameTaskAndItsHandlerRunsOnce() async throws {
        flaky("/flaky", failures: 2)
        manager.requestRetrier = quick
        let calls = Mutex(0)
        let task = manager.dataTask(with: URLRequest(url: try server.url("/flaky"))) { _ in calls.withLock { $0 += 1 } }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertNil(task.error)
        XCTAssertEqual(task.response?.statusCode, 200)
        XCTAssertEqual(hits("/flaky"), 3)
        XCTAssertEqual(calls.withLock { $0 }, 1)
    }

    /// A retry that fails before any answer leaves the task without the earlier attempt's
    /// response: it kept the 503 (and its 4 body bytes) beside the retry's error, while its
    /// `DataResponse` had no response.
    func testARetryThatGetsNoAnswerLeavesNoEarlierResponseOnTheTask() async throws {
        server.routeAnsweringFirst("/gone", with: TestResponse(status: 503, body: Data("busy".utf8)), thenWith: .fault(.resetImmediately))
        manager.requestRetrier = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.01, jitter: 0)
        let finished = Mutex<DataResponse?>(nil)
        let task = manager.dataTask(with: URLRequest(url: try server.url("/gone"))) { response in finished.withLock { $0 = response } }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        let response = try XCTUnwrap(finished.withLock { $0 })
        XCTAssertNotNil(response.error, "\(response.result)")
        XCTAssertNil(response.response)
        XCTAssertNil(task.response, "the first attempt's 503 stayed on the task")
        XCTAssertEqual(task.countOfBytesReceived, 0)
        XCTAssertEqual(response.metrics?.transactionMetrics.count, 2, "metrics list every attempt")
    }

    /// The resource timeout ends a retry in mid-exchange: its metrics list that attempt too (the
    /// 503 alone was listed, beside `.timedOut`). A cancel the same.
    func testAnAttemptCutShortIsInTheMetrics() async throws {
        for cancels in [false, true] {
            server.routeAnsweringFirst("/stall\(cancels)", with: TestResponse(status: 503), thenWith: .fault(.acceptAndNeverRespond))
            var configuration = SessionConfiguration.default
            configuration.timeoutIntervalForResource = cancels ? 60 : 1
            let manager = URLSessionManager.raw(configuration)
            manager.requestRetrier = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.01, jitter: 0)
            let finished = Mutex<DataResponse?>(nil)
            let task = manager.dataTask(with: URLRequest(url: try server.url("/stall\(cancels)"))) { response in
                finished.withLock { $0 = response }
            }
            let done = expectation(forNotification: .taskDidComplete, object: task)
            let before = server.requests.count
            task.resume()
            if cancels {
                XCTAssertTrue(server.waitForRequests(count: before + 2), "the retry reached the server")
                task.cancel()
            }
            await fulfillment(of: [done], timeout: 30)
            let response = try XCTUnwrap(finished.withLock { $0 })
            switch response.error as? SessionError {
            case .cancelled? where cancels, .timedOut? where !cancels: break
            default: XCTFail("cancels: \(cancels): \(response.result)")
            }
            let transactions = try XCTUnwrap(response.metrics?.transactionMetrics)
            XCTAssertEqual(transactions.map(\.statusCode), [503, 0], "cancels: \(cancels)")
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            await manager.waitUntilInvalidated()
        }
    }

    func testTheLimitIsKeptAndTheLastFailureDelivered() async throws {
        flaky("/down", failures: 10)
        manager.requestRetrier = quick  // 2 retries
        let response = await manager.response(for: URLRequest(url: try server.url("/down")))
        XCTAssertEqual(response.response?.statusCode, 503)
        XCTAssertEqual(response.data, Data("busy".utf8))
        XCTAssertEqual(hits("/down"), 3)
        XCTAssertEqual(response.metrics?.transactionMetrics.count, 3, "metrics list every attempt")
    }

    func testAPOSTIsNotRetried() async throws {
        flaky("/post", failures: 1)
        manager.requestRetrier = quick
        var request = URLRequest(url: try server.url("/post"))
        request.httpMethod = "POST"
        request.httpBody = Data("x".utf8)
        let response = await manager.response(for: request)
        XCTAssertEqual(response.response?.statusCode, 503)
        XCTAssertEqual(hits("/post"), 1)
    }

    func testAPUTBodyIsSentAgainWhole() async throws {
        let bodies = Mutex<[Int]>([])
        server.route("/put") { request in
            let attempt = bodies.withLock { list -> Int in
                list.append(request.body.count)
                return list.count
            }
            return attempt == 1 ? TestResponse(status: 500) : .text("ok")
        }
        manager.requestRetrier = quick
        var request = URLRequest(url: try server.url("/put"))
        request.httpMethod = "PUT"
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, from: Data(repeating: 9, count: 200_000)) { continuation.resume(returning: $0) }.resume()
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(bodies.withLock { $0 }, [200_000, 200_000])
    }

    /// A `Retry-After` longer than the policy waits is not waited: the 503 is delivered.
    func testARetryAfterBeyondTheMaximumIsNotWaited() async throws {
        flaky("/later", failures: 1, headers: [("Retry-After", "3600")])
        manager.requestRetrier = quick
        let response = await manager.response(for: URLRequest(url: try server.url("/later")))
        XCTAssertEqual(response.response?.statusCode, 503)
        XCTAssertEqual(hits("/later"), 1)
    }

    /// A retry the retrier puts past the resource timeout's end would never be sent: the 503
    /// and its body are the answer at once. The task waited for nothing and ended `.timedOut`,
    /// the server's answer lost.
    func testARetryPastTheResourceTimeoutDeliversTheAnswerAtOnce() async throws {
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForResource = 5
        let bounded = URLSessionManager.raw(configuration)
        defer { bounded.invalidateSessionCancelingTasks(true, resetSession: false) }
        bounded.requestRetrier = FixedRetrier(decision: .retryAfter(3600))
        flaky("/x", failures: 1)
        let response = await bounded.response(for: URLRequest(url: try server.url("/x")))
        XCTAssertNil(response.error, "\(response.result)")
        XCTAssertEqual(response.response?.statusCode, 503)
        XCTAssertEqual(response.data, Data("busy".utf8))
        XCTAssertEqual(hits("/x"), 1)
    }

    func testARefusedConnectionIsRetriedAndTheErrorDelivered() async throws {
        let closed = try LoopbackPort.closed()
        let attempts = AttemptLog()
        manager.requestRetrier = CountingRetrier(log: attempts, policy: quick)
        let response = await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: "http://127.0.0.1:\(closed)/"))))
        guard case .cannotConnect? = response.error as? SessionError else {
            return XCTFail("expected cannotConnect, got \(String(describing: response.error))")
        }
        XCTAssertEqual(attempts.values.withLock { $0 }, [0, 1, 2], "asked after each attempt, the last one refused")
    }

    /// Cancelling during a retry's wait ends the task at once with `.cancelled`.
    func testCancellingDuringTheWaitCancels() async throws {
        flaky("/wait", failures: 1)
        manager.requestRetrier = FixedRetrier(decision: .retryAfter(600))
        let task = manager.dataTask(with: URLRequest(url: try server.url("/wait"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        for _ in 0..<500 where hits("/wait") == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
        try await Task.sleep(nanoseconds: 50_000_000)  // let the retrier answer (not a timing assertion)
        task.cancel()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(task.error as? SessionError, .cancelled)
        XCTAssertEqual(hits("/wait"), 1)
    }

    /// The retried attempt has its own idle timeout: a server that never answers it times out
    /// (the wait before the retry stopped the idle clock; the attempt starts it again).
    func testARetriedAttemptStillTimesOut() async throws {
        let count = Mutex(0)
        server.route("/silent") { _ in
            let attempt = count.withLock { value -> Int in
                value += 1
                return value
            }
            return attempt == 1 ? TestResponse(status: 503) : .fault(.acceptAndNeverRespond)
        }
        manager.requestRetrier = FixedRetrier(decision: .retryAfter(0.05))
        var request = URLRequest(url: try server.url("/silent"))
        request.timeoutInterval = 0.5
        // A hang guard, not a timing assertion: without an idle clock the task never ends.
        let task = manager.dataTask(with: request) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        guard case .timedOut? = task.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: task.error))")
        }
        XCTAssertEqual(hits("/silent"), 2)
    }

    func testWithoutARetrierNothingIsRetried() async throws {
        flaky("/once", failures: 1)
        let response = await manager.response(for: URLRequest(url: try server.url("/once")))
        XCTAssertEqual(response.response?.statusCode, 503)
        XCTAssertEqual(hits("/once"), 1)
    }
}

/// The attempts a retrier was asked about.
final class AttemptLog: Sendable {
    let values = Mutex<[Int]>([])
}

/// Records each attempt, then decides as the policy does.
struct CountingRetrier: RequestRetrier {
    let log: AttemptLog
    let policy: RetryPolicy

    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        log.values.withLock { $0.append(attempt) }
        return policy.retry(task, attempt: attempt, error: error, response: response)
    }
}

/// Always answers the same.
struct FixedRetrier: RequestRetrier {
    let decision: RetryDecision

    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        attempt == 0 ? decision : .doNotRetry
    }
}

/// `RetryPolicy` alone: filters, backoff and `Retry-After`.
final class RetryPolicyTests: XCTestCase {
    func testBackoffGrowsAndJitterStaysWithinItsSpread() {
        let policy = RetryPolicy(exponentialBackoffBase: 2, exponentialBackoffScale: 0.5, jitter: 0.2)
        for attempt in 0..<4 {
            let nominal = 0.5 * pow(2, Double(attempt))
            for _ in 0..<50 {
                let wait = policy.delay(forAttempt: attempt)
                XCTAssertGreaterThanOrEqual(wait, nominal * 0.8 - 1e-9)
                XCTAssertLessThanOrEqual(wait, nominal * 1.2 + 1e-9)
            }
        }
        XCTAssertEqual(RetryPolicy(exponentialBackoffScale: 1, jitter: 0).delay(forAttempt: 3), 8)
        XCTAssertEqual(RetryPolicy(exponentialBackoffBase: 1e308, exponentialBackoffScale: 1e10, jitter: 0).delay(forAttempt: 5), .infinity)
    }

    func testRetryAfterForms() {
        let now = Date(timeIntervalSince1970: 1_000_000_000)
        XCTAssertEqual(RetryPolicy.retryAfterSeconds("120", now: now), 120)
        XCTAssertEqual(RetryPolicy.retryAfterSeconds(" 0 ", now: now), 0)
        let later = "Sun, 09 Sep 2001 02:03:20 GMT"  // now + 1,000 s
        XCTAssertEqual(try XCTUnwrap(RetryPolicy.retryAfterSeconds(later, now: now)), 1_000, accuracy: 0.5)
        XCTAssertEqual(RetryPolicy.retryAfterSeconds("Sun, 09 Sep 2001 01:00:00 GMT", now: now), 0, "a past date means now")
        XCTAssertNil(RetryPolicy.retryAfterSeconds("soon", now: now))
        XCTAssertNil(RetryPolicy.retryAfterSeconds("-5", now: now))
        XCTAssertNil(RetryPolicy.retryAfterSeconds("", now: now))
        XCTAssertEqual(RetryPolicy.retryAfterSeconds(String(repeating: "9", count: 400), now: now), .infinity)
        // The two obsolete date forms a recipient must accept (RFC 9110 §5.6.7).
        XCTAssertEqual(try XCTUnwrap(RetryPolicy.retryAfterSeconds("Sunday, 09-Sep-01 02:03:20 GMT", now: now)), 1_000, accuracy: 0.5)
        XCTAssertEqual(try XCTUnwrap(RetryPolicy.retryAfterSeconds("Sun Sep  9 02:03:20 2001", now: now)), 1_000, accuracy: 0.5)
    }

    /// A 503 whose `Retry-After` is an RFC 850 date is retried after that wait (it was not
    /// retried at all: the date was not read).
    func testARetryAfterInAnObsoleteDateFormIsRetried() throws {
        let policy = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let manager = URLSessionManager.raw()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:9/x"))
        let task = manager.dataTask(with: URLRequest(url: url)) { _ in }  // never resumed: only read
        defer { task.cancel() }
        let soon = Date().addingTimeInterval(20)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEEE, dd-MMM-yy HH:mm:ss 'GMT'"
        let response = try XCTUnwrap(HTTPURLResponse(
            url: url, statusCode: 503, httpVersion: "HTTP/1.1", headerFields: ["Retry-After": formatter.string(from: soon)]))
        guard case .retryAfter(let wait) = policy.retry(task, attempt: 0, error: nil, response: response) else {
            return XCTFail("a 503 with an RFC 850 Retry-After was not retried")
        }
        XCTAssertGreaterThan(wait, 10, "the date's wait, not the backoff's")
        XCTAssertLessThanOrEqual(wait, 21)
    }
}

/// Sets `Authorization` per attempt: a stale token first, a fresh one after.
struct TokenAdapter: RequestAdapter {
    var freshValue = "Bearer fresh"

    func adapt(_ request: URLRequest, attempt: Int) -> URLRequest {
        var request = request
        request.setValue(attempt == 0 ? "Bearer stale" : freshValue, forHTTPHeaderField: "Authorization")
        return request
    }
}

/// Retries a 401 once (a token refresh).
struct RetryUnauthorizedOnce: RequestRetrier {
    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        attempt == 0 && response?.statusCode == 401 ? .retry : .doNotRetry
    }
}

/// `requestAdapter`: every attempt's request is adapted, the retries' on the operation queue.
final class RequestAdapterTests: XCTestCase {
    func testARetryCarriesTheAdaptedRequest() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/secure") { request in
            request.header("Authorization") == "Bearer fresh" ? .text("welcome") : TestResponse(status: 401)
        }
        let manager = URLSessionManager.raw()
        manager.requestAdapter = TokenAdapter()
        manager.requestRetrier = RetryUnauthorizedOnce()
        let task = manager.dataTask(with: URLRequest(url: try server.url("/secure"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertNil(task.error)
        XCTAssertEqual(task.response?.statusCode, 200)
        XCTAssertEqual(server.requests.map { $0.header("Authorization") }, ["Bearer stale", "Bearer fresh"])
        XCTAssertEqual(task.originalRequest?.value(forHTTPHeaderField: "Authorization"), "Bearer stale")
        XCTAssertEqual(task.currentRequest?.value(forHTTPHeaderField: "Authorization"), "Bearer fresh")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// Retries go to an ftp:// URL, which Curlew refuses.
    struct SchemeChangingAdapter: RequestAdapter {
        func adapt(_ request: URLRequest, attempt: Int) -> URLRequest {
            guard attempt > 0, let url = request.url,
                var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return request }
            components.scheme = "ftp"
            var adapted = request
            adapted.url = components.url
            return adapted
        }
    }

    func testAnAdaptedRetryThatIsInvalidFailsWithoutBeingSent() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/secure", response: TestResponse(status: 401))
        let manager = URLSessionManager.raw()
        manager.requestAdapter = SchemeChangingAdapter()
        manager.requestRetrier = RetryUnauthorizedOnce()
        let response = await manager.response(for: URLRequest(url: try server.url("/secure")))
        guard case .unsupportedScheme? = response.error as? SessionError else {
            return XCTFail("expected unsupportedScheme, got \(String(describing: response.error))")
        }
        XCTAssertEqual(server.requests.count, 1, "the invalid retry never went out")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
