import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `setDownloadTaskDidResumeBlock` (AFNetworking's `setDownloadTaskDidResumeBlock:`): a
/// download made from resume data reports the offset it continues from, before its writes.
final class DownloadResumeHookTests: XCTestCase {
    /// One event the hooks saw, in the order they saw it.
    private enum Event: Equatable {
        case resumed(offset: Int64, total: Int64)
        case wrote(Int64)
    }

    /// What the hooks recorded (a class: the hooks outlive any one access).
    private final class Log: Sendable {
        let events = Mutex<[Event]>([])
    }

    private var manager: URLSessionManager!
    private var server: TestServer!
    private var directory: URL!
    private let log = Log()

    override func setUp() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-resume-hook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = directory
        manager = URLSessionManager(configuration: configuration)
        server = try TestServer()
        let log = self.log
        manager.setDownloadTaskDidResumeBlock { _, offset, total in log.events.withLock { $0.append(.resumed(offset: offset, total: total)) } }
        manager.setDownloadTaskDidWriteDataBlock { _, written, _, _ in log.events.withLock { $0.append(.wrote(written)) } }
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts a download of /file, cancels it once `bytes` arrived, and returns its resume data.
    private func resumeData(after bytes: Int64) async throws -> Data {
        let produced = Mutex<Data??>(nil)
        let task = manager.downloadTask(with: URLRequest(url: try server.url("/file")), destination: nil) { _ in }
        task.resume()
        try await eventually({ task.countOfBytesReceived >= bytes }, "bytes arrive")
        task.cancel { data in produced.withLock { $0 = .some(data) } }
        try await eventually({ produced.withLock { $0 } != nil }, "resume data arrives")
        try await eventually({ task.state == .completed }, "the task completes")
        // Hooks already queued for the cancelled download run before the log is cleared.
        let queue = manager.operationQueue
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in queue.async { done.resume() } }
        log.events.withLock { $0 = [] }
        return try XCTUnwrap(produced.withLock { $0 } ?? nil)
    }

    /// Runs a download from `data` to completion.
    private func resumed(from data: Data) async -> DataResponse {
        let destination = directory.appendingPathComponent("done-\(UUID().uuidString)")
        return await withCheckedContinuation { continuation in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }) {
                continuation.resume(returning: $0)
            }.resume()
        }
    }

    func testA206ReportsThePartialLengthBeforeAnyWrite() async throws {
        let body = patternedData(count: 600_000)
        _ = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await resumeData(after: 50_000)
        let offset = try DownloadResumeData(encoded: data).bytesReceived
        let response = await resumed(from: data)
        XCTAssertNil(response.error)
        XCTAssertEqual(response.response?.statusCode, 206)
        let seen = log.events.withLock { $0 }
        XCTAssertEqual(seen.first, .resumed(offset: offset, total: Int64(body.count)), "\(seen.prefix(3))")
        XCTAssertEqual(seen.filter { if case .resumed = $0 { true } else { false } }.count, 1)
        let written = seen.reduce(Int64(0)) { sum, event in if case .wrote(let bytes) = event { sum + bytes } else { sum } }
        XCTAssertEqual(written, Int64(body.count) - offset)
    }

    func testAWholeNewBodyReportsOffsetZero() async throws {
        let route = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 400_000), delay: .milliseconds(10))
        let data = try await resumeData(after: 50_000)
        let changed = patternedData(count: 300_000, seed: 7)
        route.state.withLock {
            $0.body = changed
            $0.entityTag = "\"v2\""
        }
        let response = await resumed(from: data)
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(log.events.withLock { $0.first }, .resumed(offset: 0, total: Int64(changed.count)))
    }

    func testAnErrorStatusIsNotAResume() async throws {
        let route = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 400_000), delay: .milliseconds(10))
        let data = try await resumeData(after: 50_000)
        route.state.withLock { $0.errorStatus = 503 }
        let response = await resumed(from: data)
        guard case .resumeFailed? = response.error as? SessionError else { return XCTFail("\(String(describing: response.error))") }
        XCTAssertEqual(log.events.withLock { $0 }, [])
    }

    func testAFreshDownloadIsNotAResume() async throws {
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 100_000))
        let destination = directory.appendingPathComponent("fresh")
        let url = try server.url("/file")
        let response = await withCheckedContinuation { continuation in
            manager.downloadTask(with: URLRequest(url: url), destination: { _, _ in destination }) {
                continuation.resume(returning: $0)
            }.resume()
        }
        XCTAssertNil(response.error)
        let seen = log.events.withLock { $0 }
        XCTAssertFalse(seen.contains { if case .resumed = $0 { true } else { false } }, "\(seen.prefix(3))")
    }
}
