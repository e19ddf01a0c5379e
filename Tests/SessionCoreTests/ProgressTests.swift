import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A task's `Progress` objects tell the truth whether or not a progress closure was given:
/// they advance, finish with the task, and control it (cancel, pause, resume).
final class ProgressTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!

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

    /// Waits (bounded) until `condition` holds; a hang guard, not a timing assertion.
    private func eventually(_ condition: () -> Bool, _ message: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(condition(), message, file: file, line: line)
    }

    func testDownloadProgressAdvancesWithoutAClosureAndFinishes() async throws {
        let body = Data(repeating: 0x2A, count: 300_000)
        server.route("/body", response: TestResponse(status: 200, body: body))
        let task = manager.dataTask(with: URLRequest(url: try server.url("/body"))) { _ in }
        let progress = try XCTUnwrap(manager.downloadProgress(for: task))
        XCTAssertEqual(progress.completedUnitCount, 0)
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(progress.totalUnitCount, 300_000)
        XCTAssertEqual(progress.completedUnitCount, 300_000)
        XCTAssertTrue(progress.isFinished)
        XCTAssertEqual(progress.fractionCompleted, 1)
    }

    func testAChunkedBodyOfUnknownLengthFinishesAtItsSize() async throws {
        server.route("/chunked", response: .stream((0..<5).map { _ in .init(Data(repeating: 1, count: 7_000)) }))
        let task = manager.dataTask(with: URLRequest(url: try server.url("/chunked"))) { _ in }
        let progress = try XCTUnwrap(manager.downloadProgress(for: task))
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(progress.completedUnitCount, 35_000)
        XCTAssertEqual(progress.totalUnitCount, 35_000)
        XCTAssertTrue(progress.isFinished)
    }

    func testUploadProgressAdvancesWithoutAClosureAndFinishes() async throws {
        server.route("/upload") { request in .text("got \(request.body.count)") }
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "PUT"
        let payload = Data(repeating: 7, count: 500_000)
        let task = manager.uploadTask(with: request, from: payload) { _ in }
        let progress = try XCTUnwrap(manager.uploadProgress(for: task))
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertNil(task.error)
        XCTAssertEqual(progress.completedUnitCount, 500_000)
        XCTAssertEqual(progress.totalUnitCount, 500_000)
        XCTAssertTrue(progress.isFinished)
    }

    /// Asked for after the task completed: made finished.
    func testProgressAskedForAfterCompletionIsFinished() async throws {
        server.route("/small", response: .text("hello"))
        let kept = manager.dataTask(with: URLRequest(url: try server.url("/small"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: kept)
        kept.resume()
        await fulfillment(of: [done], timeout: 30)
        let progress = try XCTUnwrap(manager.downloadProgress(for: kept))
        XCTAssertTrue(progress.isFinished)
        XCTAssertEqual(progress.completedUnitCount, 5)
    }

    func testCancellingTheProgressCancelsTheTask() async throws {
        server.route("/slow", response: .stream((0..<20).map { index in
            .init(Data(repeating: UInt8(index), count: 1_000), delay: .milliseconds(100))
        }))
        let task = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        let progress = try XCTUnwrap(manager.downloadProgress(for: task))
        XCTAssertTrue(progress.isCancellable)
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        progress.cancel()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(task.error as? SessionError, .cancelled)
        XCTAssertTrue(progress.isCancelled)
        XCTAssertFalse(progress.isFinished)
    }

    func testPausingAndResumingTheProgressSuspendsAndResumesTheTask() async throws {
        server.route("/slow", response: .stream((0..<10).map { index in
            .init(Data(repeating: UInt8(index), count: 1_000), delay: .milliseconds(50))
        }))
        let task = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        let progress = try XCTUnwrap(manager.downloadProgress(for: task))
        XCTAssertTrue(progress.isPausable)
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        progress.pause()
        try await eventually({ task.state == .suspended }, "pausing the progress suspends the task")
        progress.resume()
        try await eventually({ task.state != .suspended }, "resuming the progress resumes the task")
        await fulfillment(of: [done], timeout: 30)
        XCTAssertNil(task.error)
        XCTAssertEqual(progress.completedUnitCount, 10_000)
        XCTAssertTrue(progress.isFinished)
    }

    /// The Progress objects hold the task weakly: a finished task with a Progress is freed.
    func testAProgressDoesNotKeepItsTaskAlive() async throws {
        server.route("/small", response: .text("hello"))
        weak var weakTask: SessionTask?
        var progress: Progress?
        do {
            let task = manager.dataTask(with: URLRequest(url: try server.url("/small"))) { _ in }
            progress = manager.downloadProgress(for: task)
            weakTask = task
            let done = expectation(forNotification: .taskDidComplete, object: task)
            task.resume()
            await fulfillment(of: [done], timeout: 30)
        }
        try await eventually({ weakTask == nil }, "the task outlived its completion because its Progress kept it")
        XCTAssertNotNil(progress)
    }
}
