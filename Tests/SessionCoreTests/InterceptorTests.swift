import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// An error of the test's own, thrown by interceptors.
struct InterceptorTestError: Error, Equatable {
    let reason: String
}

/// Appends `mark` to the `X-Chain` field, after whatever earlier adapters wrote there.
struct ChainMark: RequestAdapter {
    let mark: String

    func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest {
        await Task.yield()  // really suspends: the chain must still keep the order
        var request = request
        let previous = request.value(forHTTPHeaderField: "X-Chain")
        request.setValue(previous.map { "\($0),\(mark)" } ?? mark, forHTTPHeaderField: "X-Chain")
        return request
    }
}

/// Suspends, then throws.
struct ThrowingAdapter: RequestAdapter {
    func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest {
        await Task.yield()
        throw InterceptorTestError(reason: "no token today")
    }
}

/// Adds a cookie of its own and a marker field to every request it adapts.
struct CookieAdapter: RequestAdapter {
    func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest {
        var request = request
        request.setValue("session=adapter", forHTTPHeaderField: "Cookie")
        request.setValue("yes", forHTTPHeaderField: "X-Adapted")
        return request
    }
}

/// A storage host on another origin whose `/blob` answers `answer`, the test server's
/// `/download` redirecting there (302), and a token service with its authenticator.
struct StorageRedirect {
    let storage: TestServer
    let tokens: TokenServer
    let refresher: URLSessionManager
    let authenticator: TokenAuthenticator

    init(from api: TestServer, answer: @escaping @Sendable (TestRequest) -> TestResponse) throws {
        storage = try TestServer()
        storage.route("/blob", answer)
        let blobURL = try storage.url("/blob")
        api.route("/download") { _ in TestResponse(status: 302, headers: [("Location", blobURL.absoluteString)]) }
        tokens = try TokenServer()
        refresher = URLSessionManager.raw()
        authenticator = TokenAuthenticator(tokenURL: try tokens.server.url("/token"), refresher: refresher)
    }

    func closeRefresher() async {
        refresher.invalidateSessionCancelingTasks(true, resetSession: false)
        await refresher.waitUntilInvalidated()
    }

    func shutdown() {
        storage.shutdown()
        tokens.server.shutdown()
    }
}

/// Counts the calls of each async requirement and answers `decision`.
final class OrderedRetrier: RequestRetrier, Sendable {
    let decision: RetryDecision
    let calls = Mutex(0)

    init(_ decision: RetryDecision) { self.decision = decision }

    func shouldRetry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) async throws -> RetryDecision {
        calls.withLock { $0 += 1 }
        return attempt == 0 ? decision : .doNotRetry
    }
}

/// Holds every adaptation until `open()`; counts them.
final class GateAdapter: RequestAdapter, Sendable {
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>], calls: Int)>((false, [], 0))

    var calls: Int { state.withLock { $0.calls } }

    func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest {
        await withCheckedContinuation { continuation in
            let isOpen = state.withLock { state -> Bool in
                state.calls += 1
                if !state.open { state.waiting.append(continuation) }
                return state.open
            }
            if isOpen { continuation.resume() }
        }
        return request
    }

    func open() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

/// `Interceptor` chains, async adapters and retriers, and how `requestAdapter`,
/// `requestRetrier` and `interceptor` combine.
final class InterceptorTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!

    override func setUp() async throws {
        manager = URLSessionManager.raw()
        server = try TestServer()
        server.route("/echo") { request in .text(request.header("X-Chain") ?? "-") }
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
    }

    private func text(_ response: DataResponse) -> String? { response.data.map { String(decoding: $0, as: UTF8.self) } }

    func testChainedAdaptersRunInOrderEachSeeingThePreviousOutput() async throws {
        manager.requestAdapter = ChainMark(mark: "a")
        manager.interceptor = Interceptor(adapters: [ChainMark(mark: "b"), ChainMark(mark: "c")], interceptors: [
            Interceptor(adapters: [ChainMark(mark: "d")])
        ])
        let response = await manager.response(for: URLRequest(url: try server.url("/echo")))
        XCTAssertNil(response.error)
        XCTAssertEqual(text(response), "a,b,c,d", "requestAdapter first, then the interceptor's chain in order")
        XCTAssertEqual(server.requests.map { $0.header("X-Chain") }, ["a,b,c,d"])
    }

    func testTheFirstAttemptIsAdaptedWhenTheTaskStartsNotWhenItIsMade() async throws {
        let gate = GateAdapter()
        manager.requestAdapter = gate
        let task = manager.dataTask(with: URLRequest(url: try server.url("/echo"))) { _ in }
        XCTAssertEqual(gate.calls, 0, "making a task runs no user code")
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        gate.open()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(gate.calls, 1)
        XCTAssertNil(task.error)
        XCTAssertEqual(server.requests.count, 1)
    }

    /// One connection per host: a task whose adapter is suspended holds neither the slot nor
    /// the driver, so a later task is adapted, sent and completed meanwhile.
    func testATaskWhoseAdapterSuspendsHoldsNoSlotAndHoldsUpNoOtherTask() async throws {
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 1
        let limited = URLSessionManager.raw(configuration)
        let gate = GateAdapter()
        let waiting = limited.dataTask(with: URLRequest(url: try server.url("/echo"))) { _ in }
        waiting.interceptor = Interceptor(adapters: [gate])
        let waitingDone = expectation(forNotification: .taskDidComplete, object: waiting)
        waiting.resume()
        let other = limited.dataTask(with: URLRequest(url: try server.url("/echo"))) { _ in }
        other.interceptor = Interceptor(adapters: [ChainMark(mark: "other")])
        let otherDone = expectation(forNotification: .taskDidComplete, object: other)
        other.resume()
        await fulfillment(of: [otherDone], timeout: 30)
        XCTAssertNil(other.error)
        XCTAssertEqual(waiting.state, .running, "still being adapted")
        XCTAssertEqual(server.requests.map { $0.header("X-Chain") }, ["other"])
        gate.open()
        await fulfillment(of: [waitingDone], timeout: 30)
        XCTAssertNil(waiting.error)
        XCTAssertEqual(server.requests.count, 2)
        limited.invalidateSessionCancelingTasks(true, resetSession: false)
        await limited.waitUntilInvalidated()
    }

    func testAnAsyncAdapterThatThrowsFailsTheTaskWithItsErrorWithoutSendingIt() async throws {
        manager.interceptor = Interceptor(adapters: [ChainMark(mark: "a"), ThrowingAdapter(), ChainMark(mark: "never")])
        let task = manager.dataTask(with: URLRequest(url: try server.url("/echo"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(task.error as? InterceptorTestError, InterceptorTestError(reason: "no token today"))
        XCTAssertTrue(server.requests.isEmpty, "nothing went out")
        let response = await manager.response(for: URLRequest(url: try server.url("/echo")))
        XCTAssertEqual(response.error as? InterceptorTestError, InterceptorTestError(reason: "no token today"))
        do {
            _ = try await manager.data(for: URLRequest(url: try server.url("/echo")))
            XCTFail("the adapter's error is thrown")
        } catch let error as InterceptorTestError {
            XCTAssertEqual(error.reason, "no token today")
        }
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testACancelWhileTheAdapterSuspendsCompletesAtOnceAndNothingIsSent() async throws {
        let gate = GateAdapter()
        manager.requestAdapter = gate
        let task = manager.dataTask(with: URLRequest(url: try server.url("/echo"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        task.cancel()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(task.error as? SessionError, .cancelled)
        gate.open()  // the adapter's late answer is dropped
        let after = await manager.response(for: URLRequest(url: try server.url("/echo")))
        XCTAssertNil(after.error)
        XCTAssertEqual(server.requests.count, 1, "only the later request went out")
    }

    func testRetriersAreAskedInOrderUntilOneRetries() async throws {
        let flaky = Mutex(0)
        server.route("/flaky") { _ in
            flaky.withLock { count -> TestResponse in
                count += 1
                return count == 1 ? TestResponse(status: 503) : .text("ok")
            }
        }
        let declines = OrderedRetrier(.doNotRetry)
        let retries = OrderedRetrier(.retry)
        let neverAsked = OrderedRetrier(.retry)
        manager.requestRetrier = declines
        manager.interceptor = Interceptor(retriers: [retries, neverAsked])
        let response = await manager.response(for: URLRequest(url: try server.url("/flaky")))
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(declines.calls.withLock { $0 }, 1, "requestRetrier is asked first")
        XCTAssertEqual(retries.calls.withLock { $0 }, 1)
        XCTAssertEqual(neverAsked.calls.withLock { $0 }, 0, "the chain stops at the first retry")
    }

    func testARetrierThatFailsTheTaskGivesItItsOwnError() async throws {
        server.route("/busy", response: TestResponse(status: 503))
        let failing = OrderedRetrier(.doNotRetryWithError(InterceptorTestError(reason: "gave up")))
        let neverAsked = OrderedRetrier(.retry)
        manager.interceptor = Interceptor(retriers: [failing, neverAsked])
        let response = await manager.response(for: URLRequest(url: try server.url("/busy")))
        XCTAssertEqual(response.error as? InterceptorTestError, InterceptorTestError(reason: "gave up"))
        XCTAssertEqual(neverAsked.calls.withLock { $0 }, 0)
        XCTAssertEqual(server.requests.count, 1)
    }

    func testExistingSynchronousConformersStillAdaptAndRetry() async throws {
        server.route("/secure") { request in
            request.header("Authorization") == "Bearer fresh" ? .text("welcome") : TestResponse(status: 401)
        }
        manager.requestAdapter = TokenAdapter()
        manager.requestRetrier = RetryUnauthorizedOnce()
        let response = await manager.response(for: URLRequest(url: try server.url("/secure")))
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(server.requests.map { $0.header("Authorization") }, ["Bearer stale", "Bearer fresh"])
    }

    func testATasksOwnInterceptorRunsAfterTheManagersAndOnlyForThatTask() async throws {
        let flaky = Mutex(0)
        server.route("/flaky") { request in
            flaky.withLock { count -> TestResponse in
                count += 1
                return count == 1 ? TestResponse(status: 503) : .text(request.header("X-Chain") ?? "-")
            }
        }
        manager.interceptor = Interceptor(adapters: [ChainMark(mark: "manager")])
        let retries = OrderedRetrier(.retry)
        let task = manager.dataTask(with: URLRequest(url: try server.url("/flaky"))) { _ in }
        task.interceptor = Interceptor(adapters: [ChainMark(mark: "task")], retriers: [retries])
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertNil(task.error)
        XCTAssertEqual(task.response?.statusCode, 200, "the task's own retrier retried its 503")
        XCTAssertEqual(retries.calls.withLock { $0 }, 1)
        XCTAssertEqual(server.requests.map { $0.header("X-Chain") }, ["manager,task", "manager,task"],
                       "each attempt adapts the caller's request: the manager's adapter, then the task's")

        let other = await manager.response(for: URLRequest(url: try server.url("/echo")))
        XCTAssertEqual(text(other), "manager", "another task has only the manager's")
    }

    /// Three features meet: a redirect to another origin (a signed storage URL), a retry of
    /// that hop (a 503 the `RetryPolicy` retries) and an adapter that adds a credential (the
    /// `AuthenticationInterceptor`). The redirect leaves the token behind, and so must the
    /// retry: the adapters run again for it, but no credential field they add goes to an
    /// origin the request was redirected to. Until 2026-11-27 the retry carried the token
    /// there. A credential the redirection hook itself put into the hop stays.
    func testARetriedHopOnAnotherOriginGetsNoCredentialFromTheAdapters() async throws {
        let storageCalls = Mutex(0)
        let redirect = try StorageRedirect(from: server) { _ in
            let call = storageCalls.withLock { calls -> Int in
                calls += 1
                return calls
            }
            return call == 1 ? TestResponse(status: 503) : .text("blob")
        }
        defer { redirect.shutdown() }
        let storage = redirect.storage
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        manager.interceptor = Interceptor(
            adapters: [AuthenticationInterceptor(
                authenticator: redirect.authenticator, credential: TestToken(token: "t0", requiresRefresh: false))],
            retriers: [])
        manager.requestAdapter = CookieAdapter()

        let response = await manager.response(for: URLRequest(url: try server.url("/download")))
        XCTAssertEqual(text(response), "blob")
        XCTAssertEqual(server.requests.last?.header("Authorization"), "Bearer t0", "the API got its token")
        XCTAssertEqual(storage.requests.count, 2, "the 503 was retried")
        for (index, request) in storage.requests.enumerated() {
            XCTAssertNil(request.header("Authorization"), "request \(index) to the other origin carried the token")
            XCTAssertNil(request.header("Cookie"), "request \(index) to the other origin carried the adapter's cookie")
            XCTAssertEqual(request.header("X-Adapted"), "yes", "request \(index): the adapters' other fields go along")
        }

        // The redirection hook's own credential for the new origin is its choice: it stays.
        storageCalls.withLock { $0 = 0 }
        manager.setTaskWillPerformHTTPRedirectionBlock { _, _, request in
            var chosen = request
            chosen.setValue("Bearer for-storage", forHTTPHeaderField: "Authorization")
            return chosen
        }
        let second = await manager.response(for: URLRequest(url: try server.url("/download")))
        XCTAssertEqual(text(second), "blob")
        XCTAssertEqual(storage.requests.suffix(2).map { $0.header("Authorization") }, ["Bearer for-storage", "Bearer for-storage"])
        await redirect.closeRefresher()
    }

    /// The interceptor judges refusals of the origin it authenticates only: a 401 from the
    /// storage host an API redirected to (which never saw the token) is the task's answer, with
    /// no refresh and no retry. Until 2026-11-27 it was retried without a token (the request
    /// "was sent with an older credential") until the refresh window gave up with
    /// `AuthenticationError.excessiveRefresh`.
    func testARefusalFromTheOriginARedirectReachedIsNotTheInterceptors() async throws {
        let redirect = try StorageRedirect(from: server) { _ in
            TestResponse(status: 401, headers: [("WWW-Authenticate", "Bearer")])
        }
        defer { redirect.shutdown() }
        let storage = redirect.storage
        let tokens = redirect.tokens
        let interceptor = AuthenticationInterceptor(
            authenticator: redirect.authenticator, credential: TestToken(token: "t0", requiresRefresh: false))
        manager.interceptor = interceptor

        let response = await manager.response(for: URLRequest(url: try server.url("/download")))
        XCTAssertNil(response.error, "\(String(describing: response.error))")
        XCTAssertEqual(response.response?.statusCode, 401)
        XCTAssertEqual(storage.requests.count, 1, "the storage host's refusal was retried")
        XCTAssertEqual(tokens.tokenRequests, 0)
        XCTAssertEqual(interceptor.refreshCount, 0)
        await redirect.closeRefresher()
    }

    /// A → B → A: back on the first origin the hop still carries no credential (it stays
    /// behind once a redirect crossed origins), so the interceptor's retry sent the same
    /// unauthenticated request again and again, until `excessiveRefresh` replaced the 401.
    func testARefusalAfterARedirectBackToTheFirstOriginIsNotTheInterceptors() async throws {
        let finalURL = try server.url("/final")
        let redirect = try StorageRedirect(from: server) { _ in
            TestResponse(status: 302, headers: [("Location", finalURL.absoluteString)])
        }
        defer { redirect.shutdown() }
        server.route("/final") { _ in TestResponse(status: 401, headers: [("WWW-Authenticate", "Bearer")]) }
        let interceptor = AuthenticationInterceptor(
            authenticator: redirect.authenticator, credential: TestToken(token: "t0", requiresRefresh: false))
        manager.interceptor = interceptor

        let response = await manager.response(for: URLRequest(url: try server.url("/download")))
        XCTAssertNil(response.error, "\(String(describing: response.error))")
        XCTAssertEqual(response.response?.statusCode, 401)
        let finals = server.requests.filter { $0.uri == "/final" }
        XCTAssertEqual(finals.count, 1, "the refusal was retried")
        XCTAssertEqual(finals.first?.headerValues("Authorization"), [], "the credential came back with the hop")
        XCTAssertEqual(redirect.tokens.tokenRequests, 0)
        XCTAssertEqual(interceptor.refreshCount, 0)
        await redirect.closeRefresher()
    }

    /// Each retry adapts the caller's request anew: adapting the last attempt's adapted request
    /// piled the adapters' additions up (`a`, then `a,a`, then `a,a,a`).
    func testARetryAdaptsTheCallersRequestAgainNotTheAdaptedOne() async throws {
        let attempts = Mutex(0)
        server.route("/busy-echo") { request in
            let attempt = attempts.withLock { count -> Int in
                count += 1
                return count
            }
            return attempt <= 2 ? TestResponse(status: 503) : .text(request.header("X-Chain") ?? "-")
        }
        manager.requestAdapter = ChainMark(mark: "a")
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let response = await manager.response(for: URLRequest(url: try server.url("/busy-echo")))
        XCTAssertEqual(text(response), "a")
        XCTAssertEqual(server.requests.filter { $0.path == "/busy-echo" }.map { $0.header("X-Chain") ?? "-" }, ["a", "a", "a"])
    }

    func testRetryDecisionsCompare() {
        XCTAssertEqual(RetryDecision.retry, .retry)
        XCTAssertEqual(RetryDecision.retryAfter(1), .retryAfter(1))
        XCTAssertNotEqual(RetryDecision.retryAfter(1), .retryAfter(2))
        XCTAssertNotEqual(RetryDecision.doNotRetry, .doNotRetryWithError(InterceptorTestError(reason: "x")))
        XCTAssertEqual(
            RetryDecision.doNotRetryWithError(InterceptorTestError(reason: "x")), .doNotRetryWithError(InterceptorTestError(reason: "x")))
        XCTAssertNotEqual(
            RetryDecision.doNotRetryWithError(InterceptorTestError(reason: "x")), .doNotRetryWithError(InterceptorTestError(reason: "y")))
    }
}

/// The retrier's `doNotRetryWithError` answer, in the state machine alone.
final class InterceptorStateMachineTests: XCTestCase {
    func testARetrierErrorFinishesWithThatErrorInsteadOfTheAttempts() {
        var machine = TransferStateMachine(timeouts: TransferTimeouts(idle: 100, total: 10_000), maximumRedirects: 16, now: 0)
        machine.attached(now: 0)
        _ = machine.connecting(now: 0)
        machine.headReceived(.deliver, now: 0)
        XCTAssertEqual(machine.exchangeEnded(TransferStateMachine.EndFacts(), now: 1), .finish(nil))
        let refused = InterceptorTestError(reason: "refresh failed")
        XCTAssertEqual(machine.retryDecided(.doNotRetryWithError(refused), now: 1), .ignore, "not asked yet")
        XCTAssertTrue(machine.retrierAsked(error: .timedOut("idle"), now: 2))
        XCTAssertEqual(
            machine.retryDecided(.doNotRetryWithError(refused), now: 3),
            .finish(.interceptorFailed(InterceptorFailure(stage: .retry, underlying: refused))))
        XCTAssertEqual(machine.retryCount, 0)
        XCTAssertNil(machine.pendingError)
        XCTAssertEqual(SessionError.interceptorFailed(InterceptorFailure(stage: .retry, underlying: refused)).surfaced as? InterceptorTestError, refused)
    }
}
