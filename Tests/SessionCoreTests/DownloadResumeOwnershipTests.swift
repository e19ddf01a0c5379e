import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
@testable import SessionCore

/// Resume data names a path; whatever is at that path when the download resumes must be this
/// user's own partial file before a byte is written to it. A file of another user's, a hard
/// link (another name for the same bytes) or a file others may write to is refused with a
/// clear error, and left exactly as it was.
final class DownloadResumeOwnershipTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!
    var root: URL!
    var downloads: URL!

    override func setUp() async throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-dlo-\(UUID().uuidString)")
        downloads = root.appendingPathComponent("partial")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = downloads
        manager = URLSessionManager(configuration: configuration)
        server = try TestServer()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
        try? FileManager.default.removeItem(at: root)
    }

    /// Starts a download of `/file` and cancels it for resume data once some bytes arrived.
    private func resumeData() async throws -> (Data, DownloadResumeData) {
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 300_000), delay: .milliseconds(10))
        let resumeData = Mutex<Data??>(nil)
        let task = manager.downloadTask(with: URLRequest(url: try server.url("/file")), destination: nil) { _ in }
        task.resume()
        try await eventually({ task.countOfBytesReceived >= 30_000 }, "bytes arrive")
        task.cancel { data in resumeData.withLock { $0 = .some(data) } }
        try await eventually({ resumeData.withLock { $0 } != nil }, "resume data arrives")
        try await eventually({ task.state == .completed }, "the task completes")
        let data = try XCTUnwrap(resumeData.withLock { $0 } ?? nil)
        return (data, try DownloadResumeData(encoded: data))
    }

    /// Resumes from `data` and returns the error it failed with (nil: it succeeded).
    private func resumeDownload(_ data: Data) async -> (SessionError?, URL) {
        let destination = root.appendingPathComponent("done-\(UUID().uuidString)")
        let response = await withCheckedContinuation { continuation in
            manager.downloadTask(
                withResumeData: data, destination: { _, _ in destination },
                completionHandler: { continuation.resume(returning: $0) }
            ).resume()
        }
        return (response.error as? SessionError, destination)
    }

    private func info(_ url: URL) throws -> stat {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { throw CocoaError(.fileReadNoSuchFile) }
        return info
    }

    func testAPartialFileOwnedByAnotherUserIsRefusedAndLeftAlone() async throws {
        let (data, resume) = try await resumeData()
        let partial = resume.partialFileURL
        let planted = Data(repeating: 0x41, count: Int(resume.bytesReceived))
        try FileManager.default.removeItem(at: partial)
        try planted.write(to: partial)
        XCTAssertEqual(chown(partial.path, 65534, 65534), 0, "tests run as root")
        XCTAssertEqual(chmod(partial.path, 0o644), 0)
        let (error, destination) = await resumeDownload(data)
        guard case .fileWriteFailed(let message)? = error else {
            return XCTFail("expected a refusal, got \(String(describing: error))")
        }
        XCTAssertTrue(message.contains("not this user's own"), message)
        XCTAssertEqual(try Data(contentsOf: partial), planted, "the foreign file is untouched")
        XCTAssertEqual(try info(partial).st_uid, 65534)
        XCTAssertEqual(try info(partial).st_mode & 0o777, 0o644)
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path))
    }

    func testAHardLinkedPartialFileIsRefusedAndLeftAlone() async throws {
        let (data, resume) = try await resumeData()
        let partial = resume.partialFileURL
        let before = try Data(contentsOf: partial)
        let elsewhere = root.appendingPathComponent("elsewhere")
        XCTAssertEqual(link(partial.path, elsewhere.path), 0)
        let (error, destination) = await resumeDownload(data)
        guard case .fileWriteFailed(let message)? = error else {
            return XCTFail("expected a refusal, got \(String(describing: error))")
        }
        XCTAssertTrue(message.contains("not this user's own"), message)
        XCTAssertEqual(try Data(contentsOf: elsewhere), before, "the other name's bytes are untouched")
        XCTAssertEqual(try Data(contentsOf: partial), before)
        XCTAssertEqual(try info(partial).st_nlink, 2, "neither name removed")
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path))
    }

    func testAPartialFileOthersMayWriteToIsRefused() async throws {
        let (data, resume) = try await resumeData()
        let partial = resume.partialFileURL
        let before = try Data(contentsOf: partial)
        XCTAssertEqual(chmod(partial.path, 0o666), 0)
        let (error, _) = await resumeDownload(data)
        guard case .fileWriteFailed(let message)? = error else {
            return XCTFail("expected a refusal, got \(String(describing: error))")
        }
        XCTAssertTrue(message.contains("not this user's own"), message)
        XCTAssertEqual(try Data(contentsOf: partial), before)
        XCTAssertEqual(try info(partial).st_mode & 0o777, 0o666)
    }

    /// The user's own partial file still continues (the checks refuse only what they must).
    func testTheUsersOwnPartialFileStillContinues() async throws {
        let (data, _) = try await resumeData()
        let (error, destination) = await resumeDownload(data)
        XCTAssertNil(error)
        XCTAssertEqual(try Data(contentsOf: destination), patternedData(count: 300_000))
    }
}
