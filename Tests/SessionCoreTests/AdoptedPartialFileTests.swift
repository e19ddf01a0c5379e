import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore

/// A partial file another tool left (curl -C, a killed process) continues through resume data
/// once it is moved to `DownloadResumeData.newPartialFileURL(in:)`; under any other name the
/// resume data is refused and the file left alone.
final class AdoptedPartialFileTests: XCTestCase {
    private let body = Data((0..<6_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })

    private func makeServer() throws -> TestServer {
        let body = self.body
        return try TestServer { request in
            let range = request.headers.first { $0.name.lowercased() == "range" }?.value ?? ""
            guard range.hasPrefix("bytes="), let start = Int(range.dropFirst(6).prefix { $0 != "-" }) else {
                return TestResponse(status: 200, headers: [("ETag", "\"e1\"")], body: body)
            }
            return TestResponse(
                status: 206, headers: [("ETag", "\"e1\""), ("Content-Range", "bytes \(start)-\(body.count - 1)/\(body.count)")],
                body: body.suffix(from: start))
        }
    }

    private func download(_ resumeData: Data, manager: URLSessionManager, to destination: URL) async -> DataResponse {
        await withCheckedContinuation { continuation in
            manager.downloadTask(
                withResumeData: resumeData, destination: { _, _ in destination },
                completionHandler: { continuation.resume(returning: $0) }
            ).resume()
        }
    }

    /// A new download directory and a manager that downloads into it.
    private func downloadingManager() throws -> (URL, URLSessionManager) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-adopt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = folder
        return (folder, URLSessionManager(configuration: configuration))
    }

    func testAFileMovedToANewPartialFileURLContinues() async throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let (folder, manager) = try downloadingManager()
        defer {
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            try? FileManager.default.removeItem(at: folder)
        }

        let partial = DownloadResumeData.newPartialFileURL(in: folder)
        XCTAssertEqual(partial.deletingLastPathComponent().standardizedFileURL.path, folder.standardizedFileURL.path)
        XCTAssertNotEqual(partial, DownloadResumeData.newPartialFileURL(in: folder), "a new name each time")
        try body.prefix(2_500).write(to: partial)
        let url = try server.url("/file")
        let resume = DownloadResumeData(
            url: url, headers: [:], timeoutInterval: 30, partialFileURL: partial, bytesReceived: 2_500,
            entityTag: "\"e1\"", lastModified: nil, expectedLength: Int64(body.count))
        let destination = folder.appendingPathComponent("done.bin")
        let response = await download(resume.encoded(), manager: manager, to: destination)
        XCTAssertNil(response.error)
        XCTAssertEqual(try Data(contentsOf: destination), body)
        let sent = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(sent.headers.first { $0.name.lowercased() == "range" }?.value, "bytes=2500-")
        XCTAssertEqual(sent.headers.first { $0.name.lowercased() == "if-range" }?.value, "\"e1\"")

        // The same bytes under a name of the caller's own are refused and left as they are.
        let own = folder.appendingPathComponent("own.part")
        try body.prefix(2_500).write(to: own)
        var refused = resume
        refused.partialFileURL = own
        let failure = await download(refused.encoded(), manager: manager, to: folder.appendingPathComponent("never.bin"))
        guard case .invalidResumeData? = failure.error as? SessionError else {
            return XCTFail("expected invalidResumeData, got \(String(describing: failure.error))")
        }
        XCTAssertEqual(try Data(contentsOf: own), body.prefix(2_500))
    }

    /// Resume data for a byte range whose partial file is gone asks for the whole range
    /// again; a 206 for other bytes (a server that answers every range from byte 0) is no
    /// answer to it: the task fails and no file is made. It was taken as the range's bytes.
    func testAByteRangeAskedForAgainTakesNoOtherBytes() async throws {
        let body = self.body
        // Other bytes; then the right range, but gzip-coded (asked without Accept-Encoding, so
        // not decoded: the file would be coded bytes).
        let coded = Mutex(false)
        let server = try TestServer { _ in
            if coded.withLock({ $0 }) {
                return TestResponse(
                    status: 206,
                    headers: [("ETag", "\"e1\""), ("Content-Range", "bytes 2000-2999/\(body.count)"), ("Content-Encoding", "gzip")],
                    body: (try? Gzip.compress(body.subdata(in: 2_000..<3_000))) ?? Data())
            }
            return TestResponse(
                status: 206, headers: [("ETag", "\"e1\""), ("Content-Range", "bytes 0-99/\(body.count)")],
                body: body.prefix(100))
        }
        defer { server.shutdown() }
        let (folder, manager) = try downloadingManager()
        defer {
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            try? FileManager.default.removeItem(at: folder)
        }

        let resume = DownloadResumeData(
            url: try server.url("/file"), headers: [:], timeoutInterval: 30,
            partialFileURL: DownloadResumeData.newPartialFileURL(in: folder), bytesReceived: 500,
            entityTag: "\"e1\"", lastModified: nil, expectedLength: 1_000, rangeFirst: 2_000, rangeLast: 2_999)
        let destination = folder.appendingPathComponent("range.bin")
        let response = await download(resume.encoded(), manager: manager, to: destination)
        XCTAssertEqual(server.requests.last?.headers.first { $0.name.lowercased() == "range" }?.value, "bytes=2000-2999")
        guard case .resumeFailed(let status, _)? = response.error as? SessionError else {
            return XCTFail("expected resumeFailed, got \(String(describing: response.error))")
        }
        XCTAssertEqual(status, 206)
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path), "no file of other bytes")

        coded.withLock { $0 = true }
        let gzipped = await download(resume.encoded(), manager: manager, to: destination)
        guard case .resumeFailed(206, _)? = gzipped.error as? SessionError else {
            return XCTFail("expected resumeFailed(206), got \(String(describing: gzipped.error))")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path), "no file of coded bytes")
    }
}
