import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A loopback token server: `POST /token` issues a new token (and revokes the old one),
/// `/resource` answers 200 only to `Authorization: Bearer <current token>`, 401 otherwise.
final class TokenServer: Sendable {
    struct State {
        var current = "t0"
        var issued = 0
        var tokenRequests = 0
        var refreshFails = false
        var alwaysRefuses = false
        /// The `Authorization` of every `/resource` request, in arrival order.
        var resourceAuthorizations: [String] = []
    }

    let server: TestServer
    let state = Mutex(State())

    init() throws {
        server = try TestServer()
        // Captured strongly: the routes live as long as the server, which `shutdown()` ends.
        server.route("/token", method: "POST") { [self] _ in
            state.withLock { state -> TestResponse in
                state.tokenRequests += 1
                guard !state.refreshFails else { return TestResponse(status: 500, body: Data("token service down".utf8)) }
                state.issued += 1
                state.current = "t\(state.issued)"
                return .text(state.current)
            }
        }
        server.route("/resource") { [self] request in
            state.withLock { state -> TestResponse in
                let authorization = request.header("Authorization") ?? "-"
                state.resourceAuthorizations.append(authorization)
                guard !state.alwaysRefuses, authorization == "Bearer \(state.current)" else { return TestResponse(status: 401) }
                return .text("ok")
            }
        }
    }

    /// The server forgets its current token (a server-side revocation); the next `/token`
    /// issues a fresh one.
    func revoke() { state.withLock { $0.current = "revoked" } }

    var tokenRequests: Int { state.withLock { $0.tokenRequests } }
    var resourceAuthorizations: [String] { state.withLock { $0.resourceAuthorizations } }
}

/// A bearer token the test says is expired or not.
struct TestToken: AuthenticationCredential, Equatable {
    var token: String
    var requiresRefresh: Bool
}

/// The refresh failed: the token endpoint answered `status`.
struct RefreshFailed: Error, Equatable {
    let status: Int
}

/// Bearer tokens from `TokenServer`, refreshed through a manager of their own.
struct TokenAuthenticator: Authenticator {
    let tokenURL: URL
    let refresher: URLSessionManager
    /// Awaited before each refresh asks the token endpoint (a test holds the refresh there
    /// until every request it started is waiting for it).
    var beforeRefresh: (@Sendable () async -> Void)?

    func apply(_ credential: TestToken, to request: inout URLRequest) {
        request.setValue("Bearer \(credential.token)", forHTTPHeaderField: "Authorization")
    }

    func refresh(_ credential: TestToken) async throws -> TestToken {
        await beforeRefresh?()
        var request = URLRequest(url: tokenURL)
        request.httpMethod = "POST"
        let response = await refresher.response(for: request)
        let status = response.response?.statusCode ?? 0
        guard status == 200, let data = response.data else { throw RefreshFailed(status: status) }
        return TestToken(token: String(decoding: data, as: UTF8.self), requiresRefresh: false)
    }
}

/// `AuthenticationInterceptor` against `TokenServer`: single-flight refresh, requests held and
/// released, 401s retried once, refresh failures and a server that refuses everything.
final class AuthenticationInterceptorTests: XCTestCase {
    var tokens: TokenServer!
    var manager: URLSessionManager!
    var refresher: URLSessionManager!

    override func setUp() async throws {
        tokens = try TokenServer()
        manager = URLSessionManager.raw()
        refresher = URLSessionManager.raw()
    }

    override func tearDown() async throws {
        for manager in [manager, refresher].compactMap({ $0 }) {
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            await manager.waitUntilInvalidated()
        }
        manager = nil
        refresher = nil
        tokens.server.shutdown()
    }

    /// `holdingRefreshUntil`: the refresh waits (bounded) until that many other requests wait
    /// for it, so that "one refresh for all of them" does not depend on how fast they start.
    private func interceptor(
        _ credential: TestToken?, window: AuthenticationInterceptor<TokenAuthenticator>.RefreshWindow = .init(),
        holdingRefreshUntil waiting: Int? = nil
    ) throws -> AuthenticationInterceptor<TokenAuthenticator> {
        let box = InterceptorBox()
        var authenticator = TokenAuthenticator(tokenURL: try tokens.server.url("/token"), refresher: refresher)
        if let waiting {
            authenticator.beforeRefresh = {
                for _ in 0..<1000 where (box.interceptor.withLock { $0?.waitingRequestCount ?? 0 }) < waiting {
                    try? await Task.sleep(nanoseconds: 10_000_000)
                }
            }
        }
        let interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: credential, refreshWindow: window)
        box.interceptor.withLock { $0 = interceptor }
        manager.interceptor = interceptor
        return interceptor
    }

    /// `count` concurrent GETs of `/resource`, each as a task of the manager.
    private func fetchConcurrently(_ count: Int) async throws -> [DataResponse] {
        let url = try tokens.server.url("/resource")
        let manager = self.manager!
        return await withTaskGroup(of: DataResponse.self) { group in
            for _ in 0..<count { group.addTask { await manager.response(for: URLRequest(url: url)) } }
            var responses: [DataResponse] = []
            for await response in group { responses.append(response) }
            return responses
        }
    }

    func testFiftyRequestsWithAnExpiredTokenShareOneRefresh() async throws {
        let interceptor = try interceptor(TestToken(token: "t0", requiresRefresh: true))
        let responses = try await fetchConcurrently(50)
        XCTAssertEqual(responses.filter { $0.response?.statusCode == 200 }.count, 50, "\(responses.compactMap(\.error))")
        XCTAssertEqual(tokens.tokenRequests, 1, "exactly one refresh")
        XCTAssertEqual(interceptor.refreshCount, 1)
        XCTAssertEqual(tokens.resourceAuthorizations, Array(repeating: "Bearer t1", count: 50), "held, then sent with the new token")
        XCTAssertEqual(interceptor.credential, TestToken(token: "t1", requiresRefresh: false))
    }

    func testATokenRevokedMidFlightIsRefreshedOnceAndEveryRefusedRequestRetriedOnce() async throws {
        let interceptor = try interceptor(TestToken(token: "t0", requiresRefresh: false))
        let warmUp = try await fetchConcurrently(1)
        XCTAssertEqual(warmUp.first?.response?.statusCode, 200)
        tokens.revoke()
        let responses = try await fetchConcurrently(50)
        XCTAssertEqual(responses.filter { $0.response?.statusCode == 200 }.count, 50, "\(responses.compactMap(\.error))")
        XCTAssertEqual(tokens.tokenRequests, 1, "exactly one refresh for all the 401s")
        XCTAssertEqual(interceptor.refreshCount, 1)
        let sent = tokens.resourceAuthorizations.dropFirst()  // after the warm-up
        let refused = sent.filter { $0 == "Bearer t0" }.count
        XCTAssertGreaterThan(refused, 0, "requests went out with the revoked token")
        XCTAssertEqual(sent.filter { $0 == "Bearer t1" }.count, 50, "each task succeeded once with the new token")
        XCTAssertEqual(sent.count, 50 + refused, "nothing but the refused requests was retried")
        for response in responses {
            // A refused attempt and its one retry, or (adapted after the refresh) one attempt.
            XCTAssertLessThanOrEqual(response.metrics?.transactionMetrics.count ?? 0, 2)
        }
        XCTAssertEqual(responses.reduce(0) { $0 + ($1.metrics?.transactionMetrics.count ?? 0) }, sent.count)
    }

    func testARefreshThatFailsFailsEveryHeldRequestWithTheRefreshError() async throws {
        tokens.state.withLock { $0.refreshFails = true }
        let interceptor = try interceptor(TestToken(token: "t0", requiresRefresh: true), holdingRefreshUntil: 19)
        let responses = try await fetchConcurrently(20)
        XCTAssertEqual(responses.count, 20)
        for response in responses {
            XCTAssertEqual(response.error as? RefreshFailed, RefreshFailed(status: 500), "\(String(describing: response.error))")
        }
        XCTAssertEqual(tokens.tokenRequests, 1, "one refresh, failed, for all of them")
        XCTAssertEqual(interceptor.refreshCount, 1)
        XCTAssertTrue(tokens.resourceAuthorizations.isEmpty, "no request went out without a valid token")
    }

    func testA401WhoseRefreshFailsEndsTheTaskWithTheRefreshError() async throws {
        _ = try interceptor(TestToken(token: "t0", requiresRefresh: false))
        tokens.revoke()
        tokens.state.withLock { $0.refreshFails = true }
        let task = manager.dataTask(with: URLRequest(url: try tokens.server.url("/resource"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(task.error as? RefreshFailed, RefreshFailed(status: 500), "\(String(describing: task.error))")
        XCTAssertEqual(task.response?.statusCode, 401, "the refused attempt's response stays")
        XCTAssertEqual(tokens.tokenRequests, 1)
        XCTAssertEqual(tokens.resourceAuthorizations, ["Bearer t0"])
    }

    /// Cancellation meets a refresh: a task held for a token refresh that has not come back
    /// ends with `.cancelled` at once (the refresh still hanging), its closures released, and
    /// is never sent; the refresh, once it returns, serves the next request.
    func testATaskCancelledWhileItsRefreshHangsEndsAtOnceAndIsNeverSent() async throws {
        let gate = AsyncStream<Void>.makeStream()
        var authenticator = TokenAuthenticator(tokenURL: try tokens.server.url("/token"), refresher: refresher)
        authenticator.beforeRefresh = { for await _ in gate.stream {} }  // until the test lets it go
        let interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: TestToken(token: "t0", requiresRefresh: true))
        manager.interceptor = interceptor
        final class Captured: Sendable {}
        weak var captured: Captured?
        let ended = Mutex<[String]>([])
        let url = try tokens.server.url("/resource")
        let task: DataTask = {
            let object = Captured()
            captured = object
            return manager.dataTask(with: URLRequest(url: url)) { response in
                _ = object
                ended.withLock { $0.append(response.error.map { "\($0)" } ?? "ok") }
            }
        }()
        task.resume()
        for _ in 0..<500 where interceptor.waitingRequestCount == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(interceptor.waitingRequestCount, 1, "the task waits for the refresh")
        task.cancel()
        try await eventually({ task.state == .completed }, "the cancelled task ended while its refresh hangs")
        // The state is `.completed` before the handler runs on the completion queue.
        try await eventually({ !ended.withLock { $0 }.isEmpty }, "the completion handler ran")
        XCTAssertEqual(ended.withLock { $0 }, ["\(SessionError.cancelled)"])
        try await eventually({ captured == nil }, "the completion handler (and what it captured) released")
        XCTAssertEqual(tokens.tokenRequests, 0, "the refresh has not reached the token endpoint yet")

        gate.continuation.finish()
        try await eventually({ tokens.tokenRequests == 1 && interceptor.waitingRequestCount == 0 }, "the refresh returned")
        XCTAssertTrue(tokens.resourceAuthorizations.isEmpty, "the cancelled task was sent after all")
        let next = await manager.response(for: URLRequest(url: url))
        XCTAssertEqual(next.response?.statusCode, 200)
        XCTAssertEqual(tokens.resourceAuthorizations, ["Bearer t1"])
        XCTAssertEqual(ended.withLock { $0 }.count, 1, "the handler ran once")
    }

    /// A refresh that never ends (its token server never answers) is bounded by the resource
    /// timeout: the task ends `.timedOut`, never sent. The task's clock started only with its
    /// transfer, so it waited as long as the refresh did: forever.
    func testARefreshThatNeverEndsIsBoundedByTheResourceTimeout() async throws {
        let gate = AsyncStream<Void>.makeStream()
        defer { gate.continuation.finish() }
        var authenticator = TokenAuthenticator(tokenURL: try tokens.server.url("/token"), refresher: refresher)
        authenticator.beforeRefresh = { for await _ in gate.stream {} }  // until the test lets it go
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForResource = 1
        let bounded = URLSessionManager.raw(configuration)
        defer { bounded.invalidateSessionCancelingTasks(true, resetSession: false) }
        bounded.interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: TestToken(token: "t0", requiresRefresh: true))
        let ended = expectation(description: "the task ended")
        let outcome = Mutex<DataResponse?>(nil)
        bounded.dataTask(with: URLRequest(url: try tokens.server.url("/resource"))) { response in
            outcome.withLock { $0 = response }
            ended.fulfill()
        }.resume()
        await fulfillment(of: [ended], timeout: 30)
        guard case .timedOut(let detail)? = outcome.withLock({ $0 })?.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: outcome.withLock { $0 }?.error))")
        }
        XCTAssertTrue(detail.contains("adapted"), detail)
        gate.continuation.finish()
        try await eventually({ tokens.tokenRequests == 1 }, "the refresh returned")
        XCTAssertTrue(tokens.resourceAuthorizations.isEmpty, "the timed-out task was sent after all")
    }

    /// The credential meets a refresh under way: set while the refresh runs (a sign-out, then
    /// another user's sign-in), it is not overwritten by the refresh's result, which belonged
    /// to the credential before it; the request that waited goes on with what is set then.
    func testACredentialSetWhileARefreshRunsIsNotOverwrittenByIt() async throws {
        // Each refresh waits (bounded) until the test releases it.
        let started = Mutex(0), released = Mutex(0)
        var authenticator = TokenAuthenticator(tokenURL: try tokens.server.url("/token"), refresher: refresher)
        authenticator.beforeRefresh = {
            let turn = started.withLock { count -> Int in
                count += 1
                return count
            }
            for _ in 0..<3000 where released.withLock({ $0 }) < turn { try? await Task.sleep(nanoseconds: 10_000_000) }
        }
        let interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: TestToken(token: "t0", requiresRefresh: true))
        manager.interceptor = interceptor
        let url = try tokens.server.url("/resource")

        // Signed out while the refresh runs: nothing comes back, the waiting request fails.
        let first = Task { [manager] in await manager!.response(for: URLRequest(url: url)) }
        for _ in 0..<500 where interceptor.waitingRequestCount == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(interceptor.waitingRequestCount, 1, "the request waits for the refresh")
        interceptor.credential = nil
        released.withLock { $0 += 1 }
        let signedOut = await first.value
        XCTAssertEqual(signedOut.error as? AuthenticationError, .missingCredential)
        XCTAssertNil(interceptor.credential, "the refresh brought the signed-out user's token back")
        XCTAssertTrue(tokens.resourceAuthorizations.isEmpty)

        // Another user signs in while a refresh for the first one runs: theirs stays, and the
        // waiting request is sent with it (the token endpoint now fails, so a refresh that
        // went on to ask it again could not pass for success).
        interceptor.credential = TestToken(token: "t0", requiresRefresh: true)
        let second = Task { [manager] in await manager!.response(for: URLRequest(url: url)) }
        for _ in 0..<500 where interceptor.waitingRequestCount == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
        tokens.state.withLock { state in
            state.current = "bob"
            state.refreshFails = true
        }
        interceptor.credential = TestToken(token: "bob", requiresRefresh: false)
        released.withLock { $0 += 1 }
        let signedIn = await second.value
        XCTAssertEqual(signedIn.response?.statusCode, 200, "\(signedIn.result)")
        XCTAssertEqual(interceptor.credential?.token, "bob", "the refresh replaced the new user's credential")
        XCTAssertEqual(tokens.resourceAuthorizations, ["Bearer bob"])
    }

    /// The interceptor's limit counts its own retries: six 503s a `RetryPolicy` retried used
    /// it up (`attempt` counts every retry), and the 401 after them ended with
    /// `excessiveRefresh` though no refresh had run.
    func testRetriesForOtherReasonsDoNotSpendTheRefreshLimit() async throws {
        let busy = Mutex(0)
        let tokens: TokenServer = self.tokens
        tokens.server.route("/busy-resource") { request in
            let attempt = busy.withLock { count -> Int in
                count += 1
                return count
            }
            guard attempt > 6 else { return TestResponse(status: 503) }
            return tokens.state.withLock { request.header("Authorization") == "Bearer \($0.current)" } ? .text("ok") : TestResponse(status: 401)
        }
        let interceptor = try interceptor(TestToken(token: "t0", requiresRefresh: false))
        manager.requestRetrier = RetryPolicy(retryLimit: 10, exponentialBackoffScale: 0.001, jitter: 0)
        tokens.revoke()
        let response = await manager.response(for: URLRequest(url: try tokens.server.url("/busy-resource")))
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(interceptor.refreshCount, 1)
        XCTAssertEqual(busy.withLock { $0 }, 8, "six 503s, the 401, the 200")
    }

    func testAServerThatAlwaysRefusesEndsWithTheBoundedError() async throws {
        tokens.state.withLock { $0.alwaysRefuses = true }
        let interceptor = try interceptor(
            TestToken(token: "t0", requiresRefresh: false), window: .init(interval: 3600, maximumRefreshes: 3))
        let single = try await fetchConcurrently(1)
        XCTAssertEqual(single.first?.error as? AuthenticationError, .excessiveRefresh(maximumRefreshes: 3, interval: 3600))
        XCTAssertEqual(tokens.tokenRequests, 3)
        XCTAssertEqual(interceptor.refreshCount, 3)
        XCTAssertEqual(tokens.resourceAuthorizations, ["Bearer t0", "Bearer t1", "Bearer t2", "Bearer t3"])

        // The window is spent: many more requests end too, without another refresh.
        let many = try await fetchConcurrently(10)
        for response in many {
            XCTAssertEqual(response.error as? AuthenticationError, .excessiveRefresh(maximumRefreshes: 3, interval: 3600))
        }
        XCTAssertEqual(tokens.tokenRequests, 3)
    }

    /// A window of `.infinity` (at most N refreshes, ever) or of huge length counts every
    /// refresh and never traps: its milliseconds overflowed an Int64 at the first refresh.
    func testAnEndlessRefreshWindowCountsEveryRefresh() async throws {
        tokens.state.withLock { $0.alwaysRefuses = true }
        for interval in [TimeInterval.infinity, 1e300] {
            let window = AuthenticationInterceptor<TokenAuthenticator>.RefreshWindow(interval: interval, maximumRefreshes: 2)
            let before = tokens.tokenRequests
            _ = try interceptor(TestToken(token: "t0", requiresRefresh: false), window: window)
            let single = try await fetchConcurrently(1)
            XCTAssertEqual(single.first?.error as? AuthenticationError, .excessiveRefresh(maximumRefreshes: 2, interval: interval))
            XCTAssertEqual(tokens.tokenRequests - before, 2)
        }
    }

    /// The retry rule alone: a 401 for a request sent with an older token is retried at once,
    /// with no refresh; one sent with the current token refreshes first; anything but a 401 is
    /// not the interceptor's business.
    func testA401ForAnOlderTokenIsRetriedWithoutAnotherRefresh() async throws {
        let interceptor = try interceptor(TestToken(token: "t5", requiresRefresh: false))
        let url = try tokens.server.url("/resource")
        let refused = try XCTUnwrap(HTTPURLResponse(url: url, statusCode: 401, httpVersion: "HTTP/1.1", headerFields: nil))
        let unavailable = try XCTUnwrap(HTTPURLResponse(url: url, statusCode: 503, httpVersion: "HTTP/1.1", headerFields: nil))
        var older = URLRequest(url: url)
        older.setValue("Bearer t4", forHTTPHeaderField: "Authorization")
        let olderTask = manager.dataTask(with: older) { _ in }  // never resumed: only its request is read
        let decision = try await interceptor.shouldRetry(olderTask, attempt: 0, error: nil, response: refused)
        XCTAssertEqual(decision, .retry)
        XCTAssertEqual(tokens.tokenRequests, 0, "no refresh for a token already replaced")

        let notAuthentication = try await interceptor.shouldRetry(olderTask, attempt: 0, error: nil, response: unavailable)
        XCTAssertEqual(notAuthentication, .doNotRetry)

        var current = URLRequest(url: url)
        current.setValue("Bearer t5", forHTTPHeaderField: "Authorization")
        let currentTask = manager.dataTask(with: current) { _ in }
        let refreshed = try await interceptor.shouldRetry(currentTask, attempt: 0, error: nil, response: refused)
        XCTAssertEqual(refreshed, .retry)
        XCTAssertEqual(tokens.tokenRequests, 1, "the current token was refused: one refresh")
        XCTAssertEqual(interceptor.credential?.token, "t1")
        olderTask.cancel()
        currentTask.cancel()
    }

    func testWithoutACredentialRequestsFailWithMissingCredential() async throws {
        _ = try interceptor(nil)
        let responses = try await fetchConcurrently(2)
        for response in responses {
            XCTAssertEqual(response.error as? AuthenticationError, .missingCredential)
        }
        XCTAssertTrue(tokens.resourceAuthorizations.isEmpty)
    }

    func testItWorksBesideARetryPolicy() async throws {
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let interceptor = try interceptor(TestToken(token: "t0", requiresRefresh: false))
        tokens.revoke()
        let responses = try await fetchConcurrently(3)
        XCTAssertEqual(responses.filter { $0.response?.statusCode == 200 }.count, 3)
        XCTAssertEqual(interceptor.refreshCount, 1, "the policy declines 401s; the interceptor refreshes once")
    }
}

/// The interceptor a refresh gate looks at, set once it exists.
private final class InterceptorBox: Sendable {
    let interceptor = Mutex<AuthenticationInterceptor<TokenAuthenticator>?>(nil)
}
