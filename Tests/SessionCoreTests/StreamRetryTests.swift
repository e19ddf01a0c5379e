import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The retrier meets a body that user code sees as it arrives (`bytes(for:)`, which returns at
/// the head; a data handler; the data-received hook): a failure status is held back until the
/// retrier is asked, so a token refresh or a retry policy works for them as for collected
/// responses, and a failure it declines still reaches that code, head and body.
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

    /// `count` bytes of a pattern that does not repeat within 64 KiB (a misplaced chunk shows).
    private static func pattern(count: Int, step: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { bytes in
            for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* step &+ index >> 13) }
        }
        return data
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

    // MARK: - Data handlers and the data-received hook

    /// A manager-wide data-received hook only observes: it must not turn retries off. Until
    /// 2026-11-27 the 503's body reached the hook, so the attempt counted as delivered to user
    /// code and was never retried, for every data task of such a manager.
    func testADataHookDoesNotTurnRetriesOffAndSeesOnlyTheAnswer() async throws {
        let requests = scripted("/flaky-hooked", [
            TestResponse(status: 503, body: Data("busy".utf8)), TestResponse(status: 200, body: Data("ok".utf8)),
        ])
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let seen = Mutex(Data())
        manager.setDataTaskDidReceiveDataBlock { _, chunk in seen.withLock { $0 += chunk } }
        let response = await manager.response(for: URLRequest(url: try server.url("/flaky-hooked")))
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(response.data, Data("ok".utf8))
        XCTAssertEqual(requests.total, 2)
        XCTAssertEqual(seen.withLock { $0 }, Data("ok".utf8), "the hook saw the retried attempt's failure")
    }

    /// A data handler gets the retried answer's bytes only; a failure the retrier declines
    /// reaches it whole, before the completion; so does the hook's copy of a collected one.
    func testADataHandlerAndTheHookGetTheDeclinedFailureWhole() async throws {
        let payload = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 17) })
        let retried = scripted("/flaky-handled", [
            TestResponse(status: 503, body: Data("busy".utf8)), TestResponse(status: 200, body: payload),
        ])
        let declined = scripted("/gone", [TestResponse(status: 404, body: payload)])
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        for (path, status, count) in [("/flaky-handled", 200, retried), ("/gone", 404, declined)] {
            let received = Mutex(Data())
            let done = expectation(description: path)
            let handled = Mutex<DataResponse?>(nil)
            let task = manager.dataTask(with: URLRequest(url: try server.url(path))) { chunk in
                received.withLock { $0 += chunk }
            } completionHandler: { response in
                // The handler's chunks are all in before the completion runs.
                handled.withLock { $0 = response }
                XCTAssertEqual(received.withLock { $0 }, payload, path)
                done.fulfill()
            }
            task.resume()
            await fulfillment(of: [done], timeout: 30)
            XCTAssertEqual(handled.withLock { $0?.response?.statusCode }, status, path)
            XCTAssertNil(handled.withLock { $0?.error }, path)
            XCTAssertEqual(count.total, status == 200 ? 2 : 1, path)
        }
        let seen = Mutex(Data())
        manager.setDataTaskDidReceiveDataBlock { _, chunk in seen.withLock { $0 += chunk } }
        let collected = await manager.response(for: URLRequest(url: try server.url("/gone")))
        XCTAssertEqual(collected.response?.statusCode, 404)
        XCTAssertEqual(collected.data, payload)
        XCTAssertEqual(seen.withLock { $0 }, payload, "the hook did not see the declined failure's body")
    }

    /// A gzip'd failure past the handler's buffer, released to it: the task announces an
    /// unknown length (libcurl decodes it; `Content-Length` counts the encoded bytes), as a
    /// response delivered at its head does. It announced the encoded length, and progress
    /// read far past 100%.
    func testAReleasedGzippedFailureAnnouncesAnUnknownLength() async throws {
        // 16 letters at random: about 2:1 gzip'd, well within the decompression limit.
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        let payload = Data((0..<(6 << 20)).map { _ in
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(0x41 + (seed >> 60))
        })
        let compressed = try Gzip.compress(payload)
        XCTAssertLessThan(compressed.count, payload.count * 2 / 3)
        let requests = scripted("/huge-gzipped", [
            TestResponse(status: 503, headers: [("Content-Encoding", "gzip")], body: compressed),
        ])
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let received = Mutex(0)
        let done = expectation(description: "completed")
        let task = manager.dataTask(with: URLRequest(url: try server.url("/huge-gzipped"))) { chunk in
            received.withLock { $0 += chunk.count }
        } completionHandler: { _ in done.fulfill() }
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(task.response?.statusCode, 503)
        XCTAssertEqual(received.withLock { $0 }, payload.count)
        XCTAssertEqual(task.countOfBytesExpectedToReceive, -1, "the encoded length was announced for the decoded body")
        XCTAssertEqual(requests.total, 1)
    }

    /// Past the handler's 4 MiB buffer a failure is handed over as it arrives, every byte in
    /// order, and not retried.
    func testAFailureLargerThanTheHandlersBufferIsHandedOverWhole() async throws {
        let payload = Self.pattern(count: 6 << 20, step: 29)
        let requests = scripted("/huge-handled", [TestResponse(status: 503, body: payload)])
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let received = Mutex(Data())
        let done = expectation(description: "completed")
        let task = manager.dataTask(with: URLRequest(url: try server.url("/huge-handled"))) { chunk in
            received.withLock { $0 += chunk }
        } completionHandler: { _ in done.fulfill() }
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(task.response?.statusCode, 503)
        XCTAssertTrue(received.withLock { $0 } == payload, "the released body's bytes differ")
        XCTAssertEqual(requests.total, 1, "a failure already handed over was retried")
    }

    /// A failure whose body is larger than the stream's buffer is not held whole: it becomes the
    /// stream's response once the buffer would overflow (the head, the kept bytes, the rest as
    /// it arrives), every byte in order, and is not retried.
    func testAFailureBodyLargerThanTheBufferIsStreamedWholeAndNotRetried() async throws {
        let payload = Self.pattern(count: 3 << 20, step: 31)
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
