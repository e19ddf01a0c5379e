import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The configured limits where LimitsTests does not go: a compression bomb downloaded to a
/// file or streamed to a data handler, and a head over the limit made of many small lines.
/// (SessionConfiguration has no plain body-size limit: a body that is simply large streams
/// through with flat memory, LimitsTests' 200 MB test.)
final class FaultBodyLimitTests: XCTestCase {
    private var server: TestServer!
    private var manager: URLSessionManager!

    override func setUp() async throws {
        server = try TestServer()
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        manager = URLSessionManager.raw(configuration)
        // 64 MiB of zeros, gzip'd by zlib here (the ratio is ~1000:1, far over the limit of 100).
        server.route("/bomb", response: TestResponse(
            status: 200, headers: [("Content-Encoding", "gzip"), ("Content-Type", "application/octet-stream")],
            body: try Self.gzippedZeros(megabytes: 64)))
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        server.shutdown()
    }

    static func gzippedZeros(megabytes: Int) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "head -c \(megabytes)M /dev/zero | gzip -c -9"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let compressed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return compressed
    }

    func testACompressionBombDownloadedToAFileIsRefusedAndLeavesNoFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-bomb-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("bomb.bin")
        let request = URLRequest(url: try server.url("/bomb"))
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.downloadTask(with: request, destination: { _, _ in destination }) {
                continuation.resume(returning: $0)
            }.resume()
        }
        XCTAssertEqual(response.error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        XCTAssertNil(response.fileURL)
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path), "a refused body was moved into place")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertEqual(left, [])
    }

    func testACompressionBombStreamedToADataHandlerIsRefusedEarly() async throws {
        let streamed = Mutex(0)
        manager.setDataTaskDidReceiveDataBlock { _, data in streamed.withLock { $0 += data.count } }
        let response = await manager.response(for: URLRequest(url: try server.url("/bomb")))
        XCTAssertEqual(response.error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        let bytes = streamed.withLock { $0 }
        XCTAssertLessThan(bytes, 64 << 20, "the whole bomb went to the handler")
    }

    /// 25,000 short header lines (about 400 KB): the limit counts the head's bytes, not only
    /// long lines.
    func testAHeadOfManySmallLinesOverTheLimitIsRefused() async throws {
        server.route("/many") { _ in
            TestResponse(status: 200, headers: (0..<25_000).map { ("X-\($0)", "value") }, body: Data("ok".utf8))
        }
        let response = await manager.response(for: URLRequest(url: try server.url("/many")))
        XCTAssertEqual(response.error as? SessionError, .responseHeadersTooLarge(limit: SessionConfiguration.default.maximumResponseHeaderBytes))
        XCTAssertNil(response.response, "a head over the limit is not handed out")
    }

    /// A limit set above libcurl's own cap (300 KiB): libcurl refuses the head first, and that
    /// is the same refusal to the caller (not a lost connection), naming libcurl's limit.
    func testAHeadOverLibcurlsOwnCapIsRefusedAsTooLarge() async throws {
        server.route("/huge") { _ in
            TestResponse(status: 200, headers: (0..<400).map { ("X-\($0)", String(repeating: "v", count: 1000)) },
                         body: Data("ok".utf8))
        }
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.maximumResponseHeaderBytes = 1 << 20
        let generous = URLSessionManager.raw(configuration)
        let response = await generous.response(for: URLRequest(url: try server.url("/huge")))
        // 307,200 in libcurl 7.88; whatever libcurl's cap is, it is reported as such.
        if case .responseHeadersTooLarge(let limit)? = response.error as? SessionError {
            XCTAssertGreaterThan(limit, 256 * 1024)
            XCTAssertLessThan(limit, 1 << 20, "libcurl's cap, below the configured 1 MiB")
        } else {
            XCTFail("expected responseHeadersTooLarge, got \(String(describing: response.error))")
        }
        XCTAssertNil(response.response)
        generous.invalidateSessionCancelingTasks(true, resetSession: false)
        await generous.waitUntilInvalidated()
    }

    func testLibcurlsHeaderLimitIsReadFromItsMessageOnly() {
        XCTAssertEqual(SessionError.libcurlHeaderLimit(in: "Too large response headers: 307211 > 307200"), 307_200)
        XCTAssertNil(SessionError.libcurlHeaderLimit(in: "Recv failure: Connection reset by peer"))
        XCTAssertNil(SessionError.libcurlHeaderLimit(in: "Too large response headers: 1 > "))
        XCTAssertNil(SessionError.libcurlHeaderLimit(in: "Too large response headers: 1 > 12x"))
        XCTAssertNil(SessionError.libcurlHeaderLimit(in: "Too large response headers: 1 > 99999999999999999999"))
        XCTAssertNil(SessionError.libcurlHeaderLimit(in: ""))
    }
}
