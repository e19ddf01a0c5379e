import CurlewTestSupport
import Foundation
import Serialization
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

    private func upload(_ path: String = "/upload") async -> DataResponse {
        var request = URLRequest(url: try! server.url(path))
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

    /// A FIFO given as the file (a process writing into one): refused at once as no regular
    /// file, and the manager's other transfers go on. Opening it for reading waited for a
    /// writer on the driver thread, which ran nothing else meanwhile.
    func testAFIFOIsRefusedWithoutStallingTheManager() async throws {
        try await assertAFIFOIsRefusedWithoutStallingTheManager { manager, server, file, completion in
            var request = URLRequest(url: try server.url("/upload"))
            request.httpMethod = "PUT"
            manager.uploadTask(with: request, fromFile: file, completionHandler: completion).resume()
        }
    }

    /// The same for a multipart file part whose path became a FIFO after the part was added:
    /// the body stream reopens the file by its path (on the driver thread) and waited there.
    func testAMultipartFileSwappedForAFIFOIsRefusedWithoutStallingTheManager() async throws {
        let form = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: try server.url("/upload").absoluteString, parameters: nil
        ) { try $0.appendPart(withFileURL: self.file, name: "f") }
        try await assertAFIFOIsRefusedWithoutStallingTheManager { manager, _, _, completion in
            manager.dataTask(with: form, completionHandler: completion).resume()
        }
    }

    /// A caller's `Content-Length` on a multipart request (set after the form was built) is
    /// not the body's: the form went out cut at that length, with no closing boundary, and no
    /// error. The form's own length is sent.
    func testACallersContentLengthDoesNotCutAMultipartBody() async throws {
        var form = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: try server.url("/upload").absoluteString, parameters: ["note": "whole"]
        ) { try $0.appendPart(withFileURL: self.file, name: "f") }
        let length = try XCTUnwrap((form.httpBodyStream as? MultipartBodyStream)?.contentLength)
        form.setValue("100", forHTTPHeaderField: "Content-Length")
        let response = await withCheckedContinuation { continuation in
            manager.dataTask(with: form) { continuation.resume(returning: $0) }.resume()
        }
        XCTAssertNil(response.error)
        let sent = try XCTUnwrap(server.requests.last?.body)
        XCTAssertEqual(Int64(sent.count), length)
        XCTAssertTrue(String(decoding: sent.suffix(64), as: UTF8.self).hasSuffix("--\r\n"), "the closing boundary went")
    }

    /// Puts a FIFO at `file`, starts the upload `start` makes, and checks that it fails as no
    /// regular file while a GET on the same manager goes on.
    private func assertAFIFOIsRefusedWithoutStallingTheManager(
        _ start: (URLSessionManager, TestServer, URL, @escaping @Sendable (DataResponse) -> Void) throws -> Void
    ) async throws {
        try? FileManager.default.removeItem(at: file)
        XCTAssertEqual(mkfifo(file.path, 0o600), 0)
        let fifo = file!
        defer {
            // A driver stuck opening the FIFO (the defect) is released by a writer.
            let writer = open(fifo.path, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
        }
        server.route("/ping") { _ in .text("pong") }
        let uploaded = expectation(description: "the upload ended")
        let outcome = Mutex<DataResponse?>(nil)
        try start(manager, server, fifo) { response in
            outcome.withLock { $0 = response }
            uploaded.fulfill()
        }
        // The GET's own timeout needs the driver too: the expectations are the hang guard, and
        // the writer above frees a stuck driver once they gave up.
        var ping = URLRequest(url: try server.url("/ping"))
        ping.timeoutInterval = 10
        let pinged = expectation(description: "the GET ended")
        let pong = Mutex<DataResponse?>(nil)
        Task { [manager] in
            let response = await manager!.response(for: ping)
            pong.withLock { $0 = response }
            pinged.fulfill()
        }
        await fulfillment(of: [pinged, uploaded], timeout: 30)
        XCTAssertEqual(pong.withLock { $0 }?.data, Data("pong".utf8), "the manager's other transfers go on")
        let error = outcome.withLock { $0 }?.error
        XCTAssertTrue(String(describing: error).contains("regular file"), "\(String(describing: error))")
        XCTAssertEqual(server.requests.filter { $0.path == "/upload" }.count, 0, "nothing was sent")
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

    /// Rewrites the upload's file in place (same inode): other bytes, and more of them.
    private static func rewrite(_ file: URL) {
        guard let writer = try? FileHandle(forWritingTo: file) else { return XCTFail("cannot open \(file.path)") }
        writer.write(Data(repeating: 9, count: 600_000))
        try? writer.close()
    }

    /// A 307 needs the body again; the file was rewritten meanwhile. Sent again it went out
    /// under its first length, 500,000 bytes of the new content: a body neither the first
    /// attempt nor the file ever was. Now the task fails saying why, and nothing more is sent.
    func testAFileRewrittenBeforeARedirectSendsItAgainFailsTheTask() async throws {
        server.route("/moved", response: .redirect(to: "/upload", status: 307))
        let file = self.file!
        manager.setTaskWillPerformHTTPRedirectionBlock { _, _, proposed in
            Self.rewrite(file)
            return proposed
        }
        let response = await upload("/moved")
        let detail = try XCTUnwrap(bodyStreamFailure(response), "\(String(describing: response.error)) \(String(describing: response.data))")
        XCTAssertTrue(detail.contains("600000 bytes now, 500000"), detail)
        XCTAssertFalse(server.requests.contains { $0.path == "/upload" }, "the changed file was sent")
    }

    /// The same after a 503 the retrier sends again: the retry is not sent, and the task's
    /// error names the change (not the 503 it would otherwise end with).
    func testAFileRewrittenBeforeARetryFailsTheTaskWithTheReason() async throws {
        struct RewriteThenRetry: RequestRetrier {
            let rewrite: @Sendable () -> Void
            func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
                guard attempt == 0, response?.statusCode == 503 else { return .doNotRetry }
                rewrite()
                return .retry
            }
        }
        server.route("/busy", response: .text("busy", status: 503))
        let file = self.file!
        manager.requestRetrier = RewriteThenRetry { Self.rewrite(file) }
        let response = await upload("/busy")
        let detail = try XCTUnwrap(bodyStreamFailure(response), "\(String(describing: response.error)) \(String(describing: response.response?.statusCode))")
        XCTAssertTrue(detail.contains("cannot be sent again"), detail)
        XCTAssertEqual(server.requests.filter { $0.path == "/busy" }.count, 1, "the retry was not sent")
    }

    /// At the upload's first progress report (the task paused meanwhile), rewrites the file's
    /// last 1,000 of `size` bytes, not sent yet, and adds 1,000 more (a size that changed, which
    /// the clock's coarse modification times cannot miss). True once done.
    private func rewriteTailOnFirstProgress(size: Int) -> RewriteFlag {
        let rewritten = RewriteFlag()
        let file = self.file!
        manager.setTaskDidSendBodyDataBlock { task, _, total, _ in
            guard total < Int64(size), !rewritten.withLock({ $0 }) else { return }
            task.suspend()
            if let writer = try? FileHandle(forWritingTo: file) {
                try? writer.seek(toOffset: UInt64(size - 1000))
                writer.write(Data(repeating: 9, count: 2000))
                try? writer.close()
            }
            rewritten.withLock { $0 = true }
            task.resume()
        }
        return rewritten
    }

    /// Whether the rewrite happened (shared with the progress hook).
    final class RewriteFlag: Sendable {
        private let done = Mutex(false)
        func withLock<T>(_ body: (inout Bool) -> T) -> T { done.withLock { body(&$0) } }
    }

    /// Written while it is being sent (its unsent tail rewritten and grown, paused mid-upload):
    /// the last read finds the change and the body fails before its end, rather than ending
    /// as a mix of old and new bytes under the old length.
    func testAFileRewrittenMidUploadFailsTheBody() async throws {
        let size = 64 << 20
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()
        let rewritten = rewriteTailOnFirstProgress(size: size)
        let response = await upload()
        XCTAssertTrue(rewritten.withLock { $0 }, "the file changed while the upload ran")
        let detail = try XCTUnwrap(bodyStreamFailure(response), "\(String(describing: response.error))")
        XCTAssertTrue(detail.contains("changed while it was sent"), detail)
        XCTAssertFalse(server.requests.contains { $0.method == "PUT" }, "the server took the body as whole")
    }

    /// The same for a multipart body's file part: its identity was checked only when the part
    /// was opened, and a tail rewritten meanwhile went out mixed with the old bytes.
    func testAMultipartFilePartRewrittenMidUploadFailsTheBody() async throws {
        let size = 64 << 20
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()
        let file = self.file!
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: try server.url("/upload").absoluteString, parameters: ["a": "b"]
        ) { form in
            try? form.appendPart(withFileURL: file, name: "file", fileName: "big.bin", mimeType: "application/octet-stream")
        }
        let rewritten = rewriteTailOnFirstProgress(size: size)
        let response = await withCheckedContinuation { continuation in
            manager.uploadTask(withStreamedRequest: request) { continuation.resume(returning: $0) }.resume()
        }
        XCTAssertTrue(rewritten.withLock { $0 }, "the file changed while the upload ran")
        let detail = try XCTUnwrap(bodyStreamFailure(response), "\(String(describing: response.error))")
        XCTAssertTrue(detail.contains("changed while it was sent"), detail)
        XCTAssertFalse(server.requests.contains { $0.method == "POST" }, "the server took the body as whole")
    }

    /// Cancelled while its retry waits out a long back-off: the task lets its file go at once
    /// (until 2026-11-28 the scheduled retry kept the transfer, and the open file, until its
    /// deadline: an hour here).
    func testACancelDuringTheBackOffClosesTheFile() async throws {
        server.route("/busy", response: .text("busy", status: 503))
        let retrier = RecordingRetrier { _, _ in .retryAfter(3600) }
        manager.requestRetrier = retrier
        var request = URLRequest(url: try server.url("/busy"))
        request.httpMethod = "PUT"
        let finished = Mutex<DataResponse?>(nil)
        let task = manager.uploadTask(with: request, fromFile: file) { response in finished.withLock { $0 = response } }
        task.resume()
        try await eventually({ retrier.asked.withLock { $0 }.count == 1 }, "the retrier was asked")
        XCTAssertTrue(Self.isOpen(file), "the upload holds its file while it waits")
        task.cancel()
        try await eventually({ finished.withLock { $0 } != nil }, "the task completed")
        try await eventually({ !Self.isOpen(file) }, "the file is still open")
    }

    /// Whether this process has `file` open.
    private static func isOpen(_ file: URL) -> Bool {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        let target = file.resolvingSymlinksInPath().path
        return descriptors.contains { name in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")) == target
        }
    }
}
