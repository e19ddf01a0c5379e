import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// An upload's file changing under it: each a specific error, never a short body the server
/// takes for the whole, never a crash.
final class UploadFileChangeTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!
    var file: URL!

    override func setUp() async throws {
        manager = URLSessionManager.raw()
        server = try TestServer()
        server.route("/upload") { request in .text("got \(request.body.count)") }
        file = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-upload-\(UUID().uuidString)")
        try Data(repeating: 7, count: 500_000).write(to: file)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        server.shutdown()
        try? FileManager.default.removeItem(at: file)
    }

    private func upload() async -> DataResponse {
        var request = URLRequest(url: try! server.url("/upload"))
        request.httpMethod = "PUT"
        return await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, fromFile: file) { continuation.resume(returning: $0) }.resume()
        }
    }

    private func bodyStreamFailure(_ response: DataResponse) -> String? {
        if case .bodyStreamFailed(let detail)? = response.error as? SessionError { return detail }
        return nil
    }

    func testAFileDeletedBeforeTheUploadStartsIsABodyStreamError() async throws {
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "PUT"
        let response = await withCheckedContinuation { continuation in
            let task = manager.uploadTask(with: request, fromFile: file) { continuation.resume(returning: $0) }
            try? FileManager.default.removeItem(at: file)
            task.resume()
        }
        XCTAssertNotNil(bodyStreamFailure(response), "\(String(describing: response.error))")
        XCTAssertEqual(server.requests.count, 0, "nothing was sent")
    }

    func testAFileThatShrinksMidUploadIsABodyStreamErrorNotAShortBody() async throws {
        // 64 MiB: the upload is still going when the first progress report arrives.
        let size = 64 << 20
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "PUT"
        let shrunk = Mutex(false)
        let file = self.file!
        manager.setTaskDidSendBodyDataBlock { task, _, total, _ in
            guard total < Int64(size), !shrunk.withLock({ $0 }) else { return }
            // Paused while the file loses all but its first 1000 bytes, then on again.
            task.suspend()
            if let writer = try? FileHandle(forWritingTo: file) {
                try? writer.truncate(atOffset: 1_000)
                try? writer.close()
            }
            shrunk.withLock { $0 = true }
            task.resume()
        }
        let response = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, fromFile: file) { continuation.resume(returning: $0) }.resume()
        }
        XCTAssertTrue(shrunk.withLock { $0 }, "the file shrank while the upload ran")
        let detail = try XCTUnwrap(bodyStreamFailure(response), "\(String(describing: response.error))")
        XCTAssertTrue(detail.contains("of \(size) bytes"), detail)
        XCTAssertFalse(server.requests.contains { $0.method == "PUT" }, "the server never took a short body as whole")
    }
}
