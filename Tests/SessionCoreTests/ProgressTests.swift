import CurlewTestSupport
import Foundation
import Synchronization
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

    /// A gzip body: `Content-Length` counts the encoded bytes (about 1 KB for 1 MiB of zeros),
    /// the task the decoded ones. The total is unknown until the end, never smaller than what
    /// arrived (it read 99,769% before 2026-11-27), and the progress finishes at the decoded size.
    func testAContentCodedBodyHasNoTotalUntilItEnds() async throws {
        let gzipped = try FaultBodyLimitTests.gzippedZeros(megabytes: 1)
        XCTAssertLessThan(gzipped.count, 10_000)
        server.route("/gzip", response: TestResponse(status: 200, headers: [("Content-Encoding", "gzip")], body: gzipped))
        let updates = Mutex<[(completed: Int64, total: Int64)]>([])
        let task = manager.dataTask(
            with: URLRequest(url: try server.url("/gzip")), uploadProgress: nil,
            downloadProgress: { progress in updates.withLock { $0.append((progress.completedUnitCount, progress.totalUnitCount)) } },
            completionHandler: { _ in })
        let progress = try XCTUnwrap(manager.downloadProgress(for: task))
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(progress.completedUnitCount, 1 << 20)
        XCTAssertEqual(progress.totalUnitCount, 1 << 20)
        XCTAssertTrue(progress.isFinished)
        let seen = updates.withLock { $0 }
        XCTAssertFalse(seen.isEmpty)
        let past = seen.first { $0.total >= 0 && $0.completed > $0.total }
        XCTAssertNil(past.map { "\($0.completed) of \($0.total)" }, "more arrived than the total said")
        XCTAssertEqual(task.countOfBytesReceived, 1 << 20)
        XCTAssertFalse((0..<(1 << 20)).contains(task.countOfBytesExpectedToReceive), "\(task.countOfBytesExpectedToReceive)")
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

/// `setTaskDidSendBodyDataBlock`: AFNetworking's per-task upload hook.
final class SendBodyDataHookTests: XCTestCase {
    func testTheHookSeesEveryUploadedByteBeforeTheCompletionHandler() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/upload") { request in .text("got \(request.body.count)") }
        server.route("/get", response: .text("ok"))
        let manager = URLSessionManager.raw()
        struct Report: Sendable { var calls = 0, sum: Int64 = 0, lastTotal: Int64 = 0, lastExpected: Int64 = 0, tasks = Set<Int>() }
        let report = Mutex(Report())
        manager.setTaskDidSendBodyDataBlock { task, sent, total, expected in
            report.withLock {
                $0.calls += 1
                $0.sum += sent
                $0.lastTotal = total
                $0.lastExpected = expected
                $0.tasks.insert(task.taskIdentifier)
            }
        }
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "POST"
        let payload = Data(repeating: 3, count: 700_000)
        let seenAtCompletion = Mutex<Int64>(-1)
        let uploaded: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, from: payload) { response in
                seenAtCompletion.withLock { $0 = report.withLock { $0.sum } }
                continuation.resume(returning: response)
            }.resume()
        }
        XCTAssertNil(uploaded.error)
        XCTAssertEqual(seenAtCompletion.withLock { $0 }, 700_000, "the last report came before the completion handler")
        let final = report.withLock { $0 }
        XCTAssertGreaterThan(final.calls, 0)
        XCTAssertEqual(final.sum, 700_000)
        XCTAssertEqual(final.lastTotal, 700_000)
        XCTAssertEqual(final.lastExpected, 700_000)

        // A request without a body reports nothing.
        let got = await manager.response(for: URLRequest(url: try server.url("/get")))
        XCTAssertNil(got.error)
        XCTAssertEqual(report.withLock { $0.tasks.count }, 1)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A retry sends the whole body again: the hook reports its bytes again, from 0, as the
    /// task's count and upload progress count them. It reported only bytes past the first
    /// attempt's total, so a retried upload moved without a single report.
    func testTheHookReportsABodySentAgainByARetry() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let manager = URLSessionManager.raw()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let attempts = Mutex(0)
        server.route("/busy") { request in
            let attempt = attempts.withLock { value -> Int in
                value += 1
                return value
            }
            return attempt == 1 ? .text("busy \(request.body.count)", status: 503) : .text("got \(request.body.count)")
        }
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        struct Report: Sendable { var sum: Int64 = 0, lastTotal: Int64 = 0 }
        let report = Mutex(Report())
        manager.setTaskDidSendBodyDataBlock { _, sent, total, _ in
            report.withLock {
                $0.sum += sent
                $0.lastTotal = total
            }
        }
        var request = URLRequest(url: try server.url("/busy"))
        request.httpMethod = "PUT"
        // A large body, and a small one libcurl sends in one pass (its count never goes down
        // between two reports: only the new attempt says the body goes again).
        for size in [2_000_000, 10_000] {
            report.withLock { $0 = Report() }
            attempts.withLock { $0 = 0 }
            let before = server.requests.count
            let payload = Data(repeating: 5, count: size)
            let response: DataResponse = await withCheckedContinuation { continuation in
                manager.uploadTask(with: request, from: payload) { continuation.resume(returning: $0) }.resume()
            }
            XCTAssertEqual(response.data, Data("got \(size)".utf8), "\(response.result)")
            XCTAssertEqual(server.requests.dropFirst(before).map(\.body.count), [size, size], "the body went twice")
            let final = report.withLock { $0 }
            XCTAssertEqual(final.sum, Int64(2 * size), "every byte of both attempts reported once")
            XCTAssertEqual(final.lastTotal, Int64(size))
        }
    }

    /// A body of unknown length (a stream, sent chunked) is reported with an unknown total
    /// (-1, as URLSession's `NSURLSessionTransferSizeUnknown`), never libcurl's 0, which read
    /// as a body already past its end.
    func testAChunkedUploadReportsAnUnknownTotal() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/upload") { request in .text("got \(request.body.count) \(request.header("Transfer-Encoding") ?? "")") }
        let manager = URLSessionManager.raw()
        let expectedTotals = Mutex<Set<Int64>>([])
        let sent = Mutex<Int64>(0)
        manager.setTaskDidSendBodyDataBlock { _, _, total, expected in
            expectedTotals.withLock { _ = $0.insert(expected) }
            sent.withLock { $0 = total }
        }
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "POST"
        let payload = Data(repeating: 7, count: 300_000)
        request.httpBodyStream = InputStream(data: payload)
        let task = Mutex<UploadTask?>(nil)
        let uploaded: DataResponse = await withCheckedContinuation { continuation in
            let started = manager.uploadTask(withStreamedRequest: request) { response in continuation.resume(returning: response) }
            task.withLock { $0 = started }
            started.resume()
        }
        XCTAssertNil(uploaded.error)
        XCTAssertEqual(uploaded.data.map { String(decoding: $0, as: UTF8.self) }, "got 300000 chunked")
        XCTAssertEqual(sent.withLock { $0 }, 300_000)
        XCTAssertEqual(expectedTotals.withLock { $0 }, [-1], "the totals reported")
        XCTAssertEqual(task.withLock { $0 }?.countOfBytesExpectedToSend, -1)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A redirect hook gives the next hop a body of its own, a stream of unknown length, after
    /// a first hop of known length: the total reported becomes unknown (-1). It stayed the first
    /// hop's, and the progress was rescheduled at every libcurl callback as if it changed.
    func testANextHopWithABodyOfUnknownLengthReportsAnUnknownTotal() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/first") { _ in .redirect(to: "/second", status: 303) }
        server.route("/second") { request in .text("got \(request.body.count) \(request.header("Transfer-Encoding") ?? "")") }
        let manager = URLSessionManager.raw()
        let lastExpected = Mutex<Int64>(0)
        manager.setTaskDidSendBodyDataBlock { _, _, _, expected in lastExpected.withLock { $0 = expected } }
        let second = Data(repeating: 5, count: 200_000)
        manager.setTaskWillPerformHTTPRedirectionBlock { _, _, proposed in
            var next = proposed
            next.httpMethod = "POST"
            next.httpBodyStream = InputStream(data: second)
            return next
        }
        var request = URLRequest(url: try server.url("/first"))
        request.httpMethod = "POST"
        let task = Mutex<UploadTask?>(nil)
        let uploaded: DataResponse = await withCheckedContinuation { continuation in
            let started = manager.uploadTask(with: request, from: Data(repeating: 4, count: 100_000)) { continuation.resume(returning: $0) }
            task.withLock { $0 = started }
            started.resume()
        }
        XCTAssertNil(uploaded.error)
        XCTAssertEqual(uploaded.data.map { String(decoding: $0, as: UTF8.self) }, "got 200000 chunked")
        XCTAssertEqual(task.withLock { $0 }?.countOfBytesExpectedToSend, -1)
        XCTAssertEqual(lastExpected.withLock { $0 }, -1)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
