import CurlewTestSupport
import Foundation
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
