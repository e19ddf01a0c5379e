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
        try Gzip.output(of: "head -c \(megabytes)M /dev/zero | gzip -c -9")
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

/// The decompression guard against a stream whose consumer is behind: libcurl decodes a whole
/// socket read at once, and while the transfer's receive side is paused it keeps what it
/// decoded in its own pause buffer (64 MiB at most, then out of memory) and hands it over
/// again when the pause is lifted.
final class FaultBodyLimitStreamTests: XCTestCase {
    private var server: TestServer!
    private var manager: URLSessionManager!

    override func setUp() async throws {
        server = try TestServer()
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        // A read of 256 KiB holds the whole 200 KB bomb: it decodes to more than libcurl's
        // 64 MiB pause buffer whenever the consumer is behind during that read.
        configuration.receiveBufferSize = 256 << 10
        manager = URLSessionManager.raw(configuration)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        server.shutdown()
    }

    /// Streams `path` with a small buffer, waits before the first read so that the transfer
    /// is paused for the consumer (the stream is full), then reads to the end.
    private func streamBehind(_ path: String) async throws -> (error: Error?, bytes: Int) {
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url(path)), bufferSize: 64 << 10)
        try await Task.sleep(nanoseconds: 300_000_000)  // not an assertion: lets the stream fill up
        var received = 0
        do {
            for try await chunk in bytes { received += chunk.count }
        } catch {
            return (error, received)
        }
        return (nil, received)
    }

    /// 200 MiB of zeros, about 200 KB gzip'd: one socket read decodes to more than libcurl's
    /// pause buffer holds. The guard names the bomb; it is not libcurl's "out of memory" (which
    /// event streams take as a reason to connect again).
    func testABombStreamedToAConsumerThatIsBehindIsRefusedByTheGuard() async throws {
        server.route("/bomb", response: TestResponse(
            status: 200, headers: [("Content-Encoding", "gzip")], body: try FaultBodyLimitTests.gzippedZeros(megabytes: 200)))
        let (error, received) = try await streamBehind("/bomb")
        XCTAssertEqual(error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        XCTAssertLessThan(received, 64 << 20, "the bomb went to the consumer")
    }

    /// The same bomb under a limit that allows it: libcurl's pause buffer overflows all the
    /// same, and the error says so (not the system's memory running out).
    func testAPauseBufferOverflowWithinAGenerousLimitIsNamed() async throws {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.receiveBufferSize = 256 << 10
        configuration.decompressionLimit = 1 << 40
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = URLSessionManager.raw(configuration)
        server.route("/bomb", response: TestResponse(
            status: 200, headers: [("Content-Encoding", "gzip")], body: try FaultBodyLimitTests.gzippedZeros(megabytes: 200)))
        let (error, _) = try await streamBehind("/bomb")
        guard case .curl(let code, let message)? = error as? SessionError else {
            return XCTFail("expected libcurl's out of memory, got \(String(describing: error))")
        }
        XCTAssertEqual(code, 27)
        XCTAssertTrue(message.contains("64 MiB libcurl keeps for a paused transfer"), message)
    }

    /// 4 MiB of zeros, 4 KB gzip'd, in one read; the gzip trailer (8 bytes) follows 30 s
    /// later. The guard's refusal comes while libcurl hands over what it kept during the
    /// pause, and that ends the task then: not when the server next sends something, or the
    /// silence probe finds nothing, with the rest of the body dropped behind its back.
    func testABombWholeInThePauseBufferIsRefusedWhenItIsHandedOver() async throws {
        let bomb = try FaultBodyLimitTests.gzippedZeros(megabytes: 4)
        var response = TestResponse(status: 200, headers: [("Content-Encoding", "gzip")])
        response.body = .stream([
            TestResponse.Chunk(bomb.prefix(bomb.count - 8)), TestResponse.Chunk(bomb.suffix(8), delay: .seconds(30)),
        ])
        response.framing = .chunked
        server.route("/small-bomb", response: response)
        let (error, _) = try await streamBehind("/small-bomb")
        XCTAssertEqual(error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        XCTAssertEqual(manager.engine.silenceProbes.load(ordering: .relaxed), 0, "the refused replay waited for the silence probe")
    }

    /// Within the limit (text compresses about 5:1 here), a paused and resumed gzip'd stream
    /// delivers every byte once: what the guard counts at a refusal is not counted again when
    /// libcurl hands the chunk over a second time.
    func testAGzippedStreamWithinTheLimitArrivesWholeThroughPauses() async throws {
        var text = Data()
        var line = 0
        while text.count < 3 << 20 {
            text.append(Data("line \(line) of a log that repeats itself a little but not entirely, \(line * 7919 % 1000)\n".utf8))
            line += 1
        }
        let compressed = try Gzip.compress(text)
        server.route("/log", response: TestResponse(status: 200, headers: [("Content-Encoding", "gzip")], body: compressed))
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/log")), bufferSize: 16 << 10)
        var received = Data()
        var chunks = 0
        for try await chunk in bytes {
            received.append(chunk)
            chunks += 1
            if chunks % 16 == 0 { try await Task.sleep(nanoseconds: 2_000_000) }  // behind now and then
        }
        XCTAssertEqual(received.count, text.count)
        XCTAssertTrue(received == text, "the body arrived changed")
    }
}
