import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `setDataTaskDidReceiveResponseBlock`: the hook sees each data task's final response and
/// decides whether its body comes.
final class ResponseHookTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!
    let log = AskedLog()

    override func setUp() async throws {
        manager = URLSessionManager.raw()
        server = try TestServer()
        server.route("/big", response: TestResponse(status: 200, body: Data(repeating: 0x42, count: 1_000_000)))
        server.route("/empty", response: TestResponse(status: 204))
        server.route("/moved", response: .redirect(to: "/big", status: 302))
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
    }

    private func answer(_ disposition: ResponseDisposition) {
        let log = self.log
        manager.setDataTaskDidReceiveResponseBlock { _, response in
            log.entries.withLock { $0.append((response.statusCode, response.url?.path ?? "")) }
            return disposition
        }
    }

    func testBecomeDownloadStreamsTheBodyToAFileForTheHandler() async throws {
        answer(.becomeDownload)
        let seen = Mutex<(bytes: Int, data: Data?)>((-1, nil))
        let completed = expectation(forNotification: .taskDidComplete, object: nil)
        let response = await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
            manager.dataTask(with: URLRequest(url: try! server.url("/big"))) { response in
                let size = response.fileURL.flatMap { try? Data(contentsOf: $0) }?.count ?? -1
                seen.withLock { $0 = (size, response.data) }
                continuation.resume(returning: response)
            }.resume()
        }
        await fulfillment(of: [completed], timeout: 30)
        XCTAssertNil(response.error)
        XCTAssertEqual(seen.withLock { $0.bytes }, 1_000_000, "the whole body is in the file during the handler")
        XCTAssertNil(seen.withLock { $0.data }, "not in memory")
        let file = try XCTUnwrap(response.fileURL)
        XCTAssertEqual(response.value as? URL, file)
        try await eventually({ !FileManager.default.fileExists(atPath: file.path) }, "removed after the handler")
    }

    /// A retried data task whose body the hook sent to a file starts the next answer without
    /// that file: the hook places it again. The first attempt's file was left in the
    /// download directory, and an `.allow` for the retry's answer still went to that file
    /// (a file URL, no data, no serializer).
    func testARetryForgetsTheFileTheHookMadeForTheFirstAnswer() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-hook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = directory
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = URLSessionManager.raw(configuration)
        let requests = RequestCounter()
        server.route("/flaky") { _ in
            requests.next() == 1
                ? TestResponse(status: 503, body: Data(repeating: 0x45, count: 1024)) : TestResponse(status: 200, body: Data("ok".utf8))
        }
        manager.requestRetrier = RecordingRetrier { attempt, _ in attempt == 0 ? .retry : .doNotRetry }
        let wantsFileForSuccess = Mutex(false)
        manager.setDataTaskDidReceiveResponseBlock { _, response in
            response.statusCode == 503 || wantsFileForSuccess.withLock { $0 } ? .becomeDownload : .allow
        }
        func send() async -> DataResponse {
            await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
                manager.dataTask(with: URLRequest(url: try! server.url("/flaky"))) { continuation.resume(returning: $0) }.resume()
            }
        }
        let response = await send()
        XCTAssertEqual(requests.value, 2)
        XCTAssertNil(response.error)
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(response.data, Data("ok".utf8))
        XCTAssertNil(response.fileURL)
        let empty = { (try? FileManager.default.contentsOfDirectory(atPath: directory.path))?.isEmpty ?? false }
        try await eventually(empty, "no file is left in the download directory")

        // Both answers to files: the retry's is the task's, and the first one's goes.
        requests.reset()
        wantsFileForSuccess.withLock { $0 = true }
        let filed = await send()
        XCTAssertNotNil(filed.fileURL)
        try await eventually(empty, "the first answer's file went too")
    }

    /// The async calls that return the body read it from memory: for them the hook's
    /// `.becomeDownload` is `.allow` (it had given `data(for:)` an empty body with a 200, and
    /// `dataResponse(for:)` a file the completion queue removed as the caller went on). The
    /// hook is still asked, and its `.cancel` still applies.
    func testAsyncCallsThatReturnTheBodyGetItInMemoryWhenTheHookWantsAFile() async throws {
        answer(.becomeDownload)
        let url = try server.url("/big")
        let whole = Data(repeating: 0x42, count: 1_000_000)
        let (data, head) = try await manager.data(for: URLRequest(url: url))
        XCTAssertEqual(head.statusCode, 200)
        XCTAssertEqual(data, whole, "data(for:)")
        let response = try await manager.dataResponse(for: URLRequest(url: url))
        XCTAssertEqual(response.data, whole, "dataResponse(for:)")
        XCTAssertNil(response.fileURL)
        let decoded = try await manager.object(for: URLRequest(url: url), serializer: HTTPResponseSerializer())
        XCTAssertEqual(decoded, whole, "object(for:serializer:)")
        XCTAssertEqual(log.entries.withLock { $0.count }, 3, "the hook is asked for each")

        answer(.cancel)
        do {
            _ = try await manager.data(for: URLRequest(url: url))
            XCTFail("the hook's .cancel must end the call")
        } catch {
            XCTAssertEqual(error as? SessionError, .cancelled)
        }
    }

    func testAllowedResponsesDeliverTheWholeBody() async throws {
        answer(.allow)
        let response = await manager.response(for: URLRequest(url: try server.url("/big")))
        XCTAssertNil(response.error)
        XCTAssertEqual(response.data, Data(repeating: 0x42, count: 1_000_000))
        XCTAssertEqual(log.entries.withLock { $0.map(\.status) }, [200])
    }

    func testACancelledResponseEndsTheTaskWithoutItsBody() async throws {
        answer(.cancel)
        let response = await manager.response(for: URLRequest(url: try server.url("/big")))
        XCTAssertEqual(response.error as? SessionError, .cancelled)
        XCTAssertNil(response.data)
        XCTAssertEqual(log.entries.withLock { $0.count }, 1)
    }

    /// A response without a body ends before the hook answers: the end waits for it. (The
    /// hook dawdles so that the exchange surely ends first; nothing here is timed.)
    func testAResponseWithoutABodyWaitsForTheAnswer() async throws {
        manager.setDataTaskDidReceiveResponseBlock { _, _ in
            Thread.sleep(forTimeInterval: 0.1)
            return .allow
        }
        let slowlyAllowed = await manager.response(for: URLRequest(url: try server.url("/empty")))
        XCTAssertNil(slowlyAllowed.error)
        XCTAssertEqual(slowlyAllowed.response?.statusCode, 204)
        answer(.allow)
        let allowed = await manager.response(for: URLRequest(url: try server.url("/empty")))
        XCTAssertNil(allowed.error)
        XCTAssertEqual(allowed.response?.statusCode, 204)
        answer(.cancel)
        let cancelled = await manager.response(for: URLRequest(url: try server.url("/empty")))
        XCTAssertEqual(cancelled.error as? SessionError, .cancelled)
    }

    /// Redirects the manager follows are not the task's response: only the final one is asked.
    func testOnlyTheFinalResponseOfARedirectChainIsAsked() async throws {
        answer(.allow)
        let response = await manager.response(for: URLRequest(url: try server.url("/moved")))
        XCTAssertNil(response.error)
        XCTAssertEqual(response.data?.count, 1_000_000)
        let seen = log.entries.withLock { $0 }
        XCTAssertEqual(seen.map(\.status), [200])
        XCTAssertEqual(seen.map(\.url), ["/big"])
    }

    /// The hook runs before the body arrives: a task it cancels never reads the body.
    func testTheHookRunsBeforeTheCompletionHandler() async throws {
        let order = Mutex<[String]>([])
        manager.setDataTaskDidReceiveResponseBlock { _, _ in
            order.withLock { $0.append("hook") }
            return .allow
        }
        let request = URLRequest(url: try server.url("/big"))
        let _: DataResponse = await withCheckedContinuation { continuation in
            manager.dataTask(with: request) { response in
                order.withLock { $0.append("completion") }
                continuation.resume(returning: response)
            }.resume()
        }
        XCTAssertEqual(order.withLock { $0 }, ["hook", "completion"])
    }
}

/// The responses the hook was asked about.
final class AskedLog: Sendable {
    let entries = Mutex<[(status: Int, url: String)]>([])
}
