import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `SessionConfiguration.maximumCollectedBodyBytes`: a body kept in memory is bounded (a
/// hostile or mistaken server cannot fill the process's memory through a data task), and the
/// bound meets the rest: content decoding, the retrier, the response cache, the response
/// hook's downloads, and the bodies that are never kept (handlers, streams, files).
final class CollectedBodyLimitTests: XCTestCase {
    private let limit = 1 << 20
    private var server: TestServer!
    private var manager: URLSessionManager!

    override func setUp() async throws {
        server = try TestServer()
        server.route("/over", response: TestResponse(status: 200, body: Data(repeating: 0x4F, count: 4 << 20)))
        server.route("/exact", response: TestResponse(status: 200, body: Data(repeating: 0x45, count: limit)))
        var chunkedOver = TestResponse(status: 200)
        chunkedOver.body = .stream((0..<8).map { _ in TestResponse.Chunk(Data(repeating: 0x43, count: 256 << 10)) })
        chunkedOver.framing = .chunked
        server.route("/chunked-over", response: chunkedOver)
        var chunkedExact = TestResponse(status: 200)
        chunkedExact.body = .stream((0..<4).map { _ in TestResponse.Chunk(Data(repeating: 0x58, count: 256 << 10)) })
        chunkedExact.framing = .chunked
        server.route("/chunked-exact", response: chunkedExact)
        manager = makeManager()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
    }

    private func makeManager(_ change: (inout SessionConfiguration) -> Void = { _ in }) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.maximumCollectedBodyBytes = limit
        change(&configuration)
        return URLSessionManager.raw(configuration)
    }

    private func assertTooLarge(_ response: DataResponse, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(response.error as? SessionError, .responseBodyTooLarge(limit: limit), file: file, line: line)
    }

    /// Announced larger: refused at the head, before any of the body is taken; the response
    /// is still the task's to look at.
    func testABodyAnnouncedLargerIsRefusedAtItsHead() async throws {
        let task = await finishedDataTask(manager, try server.url("/over"))
        XCTAssertEqual(task.error as? SessionError, .responseBodyTooLarge(limit: limit))
        XCTAssertEqual(task.countOfBytesReceived, 0, "no byte of the body was taken")
        XCTAssertEqual(task.response?.statusCode, 200)
        XCTAssertEqual(task.response?.expectedContentLength, Int64(4 << 20))

        // A HEAD's length announces no body: nothing to refuse.
        var head = URLRequest(url: try server.url("/over"))
        head.httpMethod = "HEAD"
        let answered = await manager.response(for: head)
        XCTAssertNil(answered.error)
        XCTAssertEqual(answered.response?.expectedContentLength, Int64(4 << 20))
    }

    /// Without a length: refused as the body passes the limit, with no more than the limit
    /// kept; a body of exactly the limit arrives whole, with or without a length.
    func testAChunkedBodyIsRefusedAsItPassesTheLimitAndOneAtTheLimitArrives() async throws {
        let task = await finishedDataTask(manager, try server.url("/chunked-over"))
        XCTAssertEqual(task.error as? SessionError, .responseBodyTooLarge(limit: limit))
        XCTAssertLessThanOrEqual(task.countOfBytesReceived, Int64(limit))

        let exact = await manager.response(for: URLRequest(url: try server.url("/exact")))
        XCTAssertNil(exact.error)
        XCTAssertEqual(exact.data?.count, limit)
        let chunkedExact = await manager.response(for: URLRequest(url: try server.url("/chunked-exact")))
        XCTAssertNil(chunkedExact.error)
        XCTAssertEqual(chunkedExact.data, Data(repeating: 0x58, count: limit))
    }

    /// Content decoding: the decoded bytes count (2 MiB of zeros arrive as ~2 KB of gzip).
    func testTheDecodedBytesOfACodedBodyCount() async throws {
        let coded = try FaultBodyLimitTests.gzippedZeros(megabytes: 2)
        server.route("/coded", response: TestResponse(status: 200, headers: [("Content-Encoding", "gzip")], body: coded))
        // The bomb guard would refuse 2 MiB from 2 KB first: out of the way here.
        let manager = makeManager { $0.decompressionLimit = 1_000_000 }
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        assertTooLarge(await manager.response(for: URLRequest(url: try server.url("/coded"))))
        let unlimited = makeManager {
            $0.decompressionLimit = 1_000_000
            $0.maximumCollectedBodyBytes = 0
        }
        defer { unlimited.invalidateSessionCancelingTasks(true, resetSession: false) }
        let whole = await unlimited.response(for: URLRequest(url: try server.url("/coded")))
        XCTAssertNil(whole.error)
        XCTAssertEqual(whole.data?.count, 2 << 20)
    }

    /// Bodies that are not kept in memory are not counted: a data handler's, a stream's, a
    /// download's.
    func testBodiesThatAreNotKeptAreNotCounted() async throws {
        let received = Mutex(0)
        let handled = manager.dataTask(
            with: URLRequest(url: try server.url("/over")), dataHandler: { chunk in received.withLock { $0 += chunk.count } },
            completionHandler: nil)
        let handledDone = expectation(forNotification: .taskDidComplete, object: handled)
        handled.resume()
        await fulfillment(of: [handledDone], timeout: 30)
        XCTAssertNil(handled.error)
        XCTAssertEqual(received.withLock { $0 }, 4 << 20)

        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/chunked-over")))
        var streamed = 0
        for try await chunk in bytes { streamed += chunk.count }
        XCTAssertEqual(streamed, 2 << 20)

        let downloaded: DataResponse = await withCheckedContinuation { continuation in
            manager.downloadTask(with: URLRequest(url: try! server.url("/over")), destination: nil) {
                continuation.resume(returning: $0)
            }.resume()
        }
        XCTAssertNil(downloaded.error)
        XCTAssertEqual(downloaded.metrics?.transactionMetrics.last?.responseBodyBytesReceived, Int64(4 << 20))
    }

    /// A task that collects its body and also shows it to the data-received hook: no chunk
    /// past the limit reaches the hook. And a failure status held back for the retrier while
    /// it decides is kept up to the limit too, not up to the hook's buffer (4 MiB).
    func testTheDataReceivedHookSeesNoChunkPastTheLimit() async throws {
        let seen = Mutex(0)
        manager.setDataTaskDidReceiveDataBlock { _, chunk in seen.withLock { $0 += chunk.count } }
        assertTooLarge(await manager.response(for: URLRequest(url: try server.url("/chunked-over"))))
        XCTAssertLessThanOrEqual(seen.withLock { $0 }, limit)

        var failing = TestResponse(status: 503)
        failing.body = .stream((0..<12).map { _ in TestResponse.Chunk(Data(repeating: 0x35, count: 256 << 10)) })
        failing.framing = .chunked
        server.route("/unavailable", response: failing)
        let asked = Mutex<[String]>([])
        manager.requestRetrier = RecordingRetrier { _, error in
            asked.withLock { $0.append(error.map { "\($0)" } ?? "response") }
            return .doNotRetry
        }
        assertTooLarge(await manager.response(for: URLRequest(url: try server.url("/unavailable"))))
        XCTAssertEqual(asked.withLock { $0.count }, 1, "the retrier was asked about the refused body")
    }

    /// The response hook may yet send the body to a file: the head is not refused while it
    /// decides. Turned into a download the body arrives whole; allowed, it is refused as
    /// it passes the limit.
    func testABodyTheResponseHookTurnsIntoADownloadIsNotRefused() async throws {
        let disposition = Mutex(ResponseDisposition.becomeDownload)
        manager.setDataTaskDidReceiveResponseBlock { _, _ in disposition.withLock { $0 } }
        let size = Mutex(-1)
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.dataTask(with: URLRequest(url: try! server.url("/over"))) { response in
                size.withLock { $0 = response.fileURL.flatMap { try? Data(contentsOf: $0) }?.count ?? -1 }
                continuation.resume(returning: response)
            }.resume()
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(size.withLock { $0 }, 4 << 20, "the whole body in the file")
        disposition.withLock { $0 = .allow }
        assertTooLarge(await manager.response(for: URLRequest(url: try server.url("/over"))))
    }

    /// The retrier: the default policy does not send such a request again (the same body would
    /// come back); the response cache: a refused body is not stored, so the next request goes
    /// to the server.
    func testARefusedBodyIsNeitherRetriedNorCached() async throws {
        server.route("/cacheable", response: TestResponse(
            status: 200, headers: [("Cache-Control", "max-age=600")], body: Data(repeating: 0x63, count: 2 << 20)))
        let manager = makeManager { $0.responseCache = ResponseCache(memoryCapacity: 64 << 20) }
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01)
        assertTooLarge(await manager.response(for: URLRequest(url: try server.url("/cacheable"))))
        XCTAssertEqual(server.requests.count, 1, "not retried")
        assertTooLarge(await manager.response(for: URLRequest(url: try server.url("/cacheable"))))
        XCTAssertEqual(server.requests.count, 2, "not answered from the cache")
    }

    /// A cache shared with a manager without the limit: what that one stored is not handed to
    /// a task of this one, fresh as it is; the request goes to the server (and its answer meets
    /// the limit), and one that may not use the network fails with the limit.
    func testAStoredBodyOverTheLimitIsNotAnsweredFromASharedCache() async throws {
        let body = Data(repeating: 0x73, count: 2 << 20)
        server.route("/shared", response: TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: body))
        let cache = ResponseCache(memoryCapacity: 64 << 20)
        let storing = makeManager {
            $0.responseCache = cache
            $0.maximumCollectedBodyBytes = 0
        }
        let limited = makeManager { $0.responseCache = cache }
        defer {
            storing.invalidateSessionCancelingTasks(true, resetSession: false)
            limited.invalidateSessionCancelingTasks(true, resetSession: false)
        }
        let stored = await storing.response(for: URLRequest(url: try server.url("/shared")))
        XCTAssertEqual(stored.data, body)
        let again = await storing.response(for: URLRequest(url: try server.url("/shared")))
        XCTAssertEqual(again.data, body)
        XCTAssertEqual(server.requests.count, 1, "stored, and answered from the cache")
        assertTooLarge(await limited.response(for: URLRequest(url: try server.url("/shared"))))
        XCTAssertEqual(server.requests.count, 2, "sent to the server")
        var cacheOnly = URLRequest(url: try server.url("/shared"))
        cacheOnly.cachePolicy = .returnCacheDataDontLoad
        assertTooLarge(await limited.response(for: cacheOnly))
        XCTAssertEqual(server.requests.count, 2)
    }
}
