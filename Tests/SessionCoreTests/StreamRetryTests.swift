import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The retrier meets a streamed response (`bytes(for:)`, which returns at the head): a failure
/// status is held back until the retrier is asked, so a token refresh or a retry policy works
/// for streams as for collected responses, and a failure it declines is still the stream's,
/// head and body.
final class StreamRetryTests: XCTestCase {
    private var server: TestServer!
    private var manager: URLSessionManager!

    override func setUp() async throws {
        server = try TestServer()
        manager = URLSessionManager.raw()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
    }

    private func streamed(_ path: String, bufferSize: Int = 1 << 20) async throws -> (HTTPURLResponse, Data) {
        var request = URLRequest(url: try server.url(path))
        request.timeoutInterval = 30
        let (bytes, head) = try await manager.bytes(for: request, bufferSize: bufferSize)
        var body = Data()
        for try await chunk in bytes { body += chunk }
        return (head, body)
    }

    /// Answers each request of `path` in turn with `answers` (the last one again after them),
    /// counting the requests.
    private func scripted(_ path: String, _ answers: [TestResponse]) -> RequestCount {
        let count = RequestCount()
        server.route(path) { _ in answers[min(count.next(), answers.count - 1)] }
        return count
    }

    /// A retrier that notes it was asked, then answers as `policy` does.
    private final class AskedRetrier: RequestRetrier, Sendable {
        let policy: RetryPolicy
        let asked = Atomic<Bool>(false)

        init(_ policy: RetryPolicy) { self.policy = policy }

        func shouldRetry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) async throws -> RetryDecision {
            asked.store(true, ordering: .releasing)
            return try await policy.shouldRetry(task, attempt: attempt, error: error, response: response)
        }
    }

    /// The requests a scripted route has answered.
    private final class RequestCount: Sendable {
        private let value = Mutex(0)
        /// Counts one request; returns how many came before it.
        func next() -> Int { value.withLock { count in defer { count += 1 }; return count } }
        var total: Int { value.withLock { $0 } }
    }

    func testARevokedTokenIsRefreshedAndTheStreamGetsTheRetriedAnswer() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        let tokens = try TokenServer()
        defer { tokens.server.shutdown() }
        manager = URLSessionManager.raw()
        let refresher = URLSessionManager.raw()
        let authenticator = TokenAuthenticator(tokenURL: try tokens.server.url("/token"), refresher: refresher)
        let interceptor = AuthenticationInterceptor(
            authenticator: authenticator, credential: TestToken(token: "t0", requiresRefresh: false))
        manager.interceptor = interceptor
        tokens.revoke()

        let (bytes, head) = try await manager.bytes(for: URLRequest(url: try tokens.server.url("/resource")))
        var body = Data()
        for try await chunk in bytes { body += chunk }
        XCTAssertEqual(head.statusCode, 200, "the stream got the refused answer instead of the retried one")
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "ok")
        XCTAssertEqual(tokens.tokenRequests, 1)
        XCTAssertEqual(tokens.resourceAuthorizations, ["Bearer t0", "Bearer t1"])
        refresher.invalidateSessionCancelingTasks(true, resetSession: false)
        await refresher.waitUntilInvalidated()
    }

    func testA503TheRetryPolicyRetriesStreamsTheNextAnswer() async throws {
        let payload = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let requests = scripted("/flaky", [
            TestResponse(status: 503, body: Data("busy, try again".utf8)),
            TestResponse(status: 503, body: Data("still busy".utf8)),
            TestResponse(status: 200, body: payload),
        ])
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let (head, body) = try await streamed("/flaky")
        XCTAssertEqual(head.statusCode, 200)
        XCTAssertEqual(body, payload)
        XCTAssertEqual(requests.total, 3)
    }

    func testAFailureTheRetrierDeclinesIsTheStreamsWithItsWholeBody() async throws {
        let payload = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        let requests = scripted("/missing", [TestResponse(status: 404, body: payload)])
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)  // not for a 404
        let (head, body) = try await streamed("/missing")
        XCTAssertEqual(head.statusCode, 404)
        XCTAssertEqual(body, payload, "the held-back body did not reach the stream whole")
        XCTAssertEqual(requests.total, 1)
    }

    func testARetriedFailureThatKeepsFailingIsTheLastAnswerWithItsBody() async throws {
        let requests = scripted("/down", [TestResponse(status: 503, body: Data("down for good".utf8))])
        manager.requestRetrier = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.01, jitter: 0)
        let (head, body) = try await streamed("/down")
        XCTAssertEqual(head.statusCode, 503)
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "down for good")
        XCTAssertEqual(requests.total, 3, "the first attempt and two retries")
    }

    /// A caller that gives up while its held failure waits out the retrier's back-off (5 s
    /// here): `bytes(for:)` throws the cancellation at once, and the retry never goes out.
    func testCancellingTheCallerDuringTheBackOffEndsTheCall() async throws {
        let requests = scripted("/busy", [TestResponse(status: 503, body: Data("busy".utf8))])
        let retrier = AskedRetrier(RetryPolicy(exponentialBackoffScale: 5, jitter: 0))
        manager.requestRetrier = retrier
        let manager = self.manager!
        let url = try server.url("/busy")
        let call = Task { try await manager.bytes(for: URLRequest(url: url)) }
        try await eventually({ retrier.asked.load(ordering: .acquiring) }, "the retrier was never asked")
        call.cancel()
        do {
            _ = try await call.value
            XCTFail("the cancelled call returned the held failure")
        } catch let error as SessionError {
            XCTAssertEqual(error, .cancelled)
        } catch is CancellationError {}
        XCTAssertEqual(requests.total, 1)
    }

    /// A failure whose body is larger than the stream's buffer is not held whole: it becomes the
    /// stream's response once the buffer would overflow (the head, the kept bytes, the rest as
    /// it arrives), every byte in order, and is not retried.
    func testAFailureBodyLargerThanTheBufferIsStreamedWholeAndNotRetried() async throws {
        var payload = Data(count: 3 << 20)
        payload.withUnsafeMutableBytes { bytes in
            for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 12) }
        }
        let requests = scripted("/huge-failure", [TestResponse(status: 503, body: payload)])
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let (head, body) = try await streamed("/huge-failure", bufferSize: 64 << 10)
        XCTAssertEqual(head.statusCode, 503)
        XCTAssertEqual(body.count, payload.count)
        XCTAssertTrue(body == payload, "the released body's bytes differ")
        XCTAssertEqual(requests.total, 1, "a failure already streamed was retried")
    }

    /// Without a retrier nothing is held: `bytes(for:)` returns at the failure's head while
    /// its body is still on the way (the rest of it would come only after two minutes; held,
    /// the call would end with the 20 s timeout instead).
    func testWithoutARetrierAFailureReturnsAtItsHead() async throws {
        server.route("/slow-failure") { _ in
            TestResponse(status: 500, body: .stream([
                TestResponse.Chunk(Data("first part".utf8)),
                TestResponse.Chunk(Data("never waited for".utf8), delay: .seconds(120)),
            ]))
        }
        var request = URLRequest(url: try server.url("/slow-failure"))
        request.timeoutInterval = 20
        let (bytes, head) = try await manager.bytes(for: request)
        XCTAssertEqual(head.statusCode, 500)
        var iterator = bytes.makeAsyncIterator()
        let first = try await iterator.next()
        XCTAssertEqual(first.map { String(decoding: $0, as: UTF8.self) }, "first part")
    }
}
