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

    /// 4 MiB of zeros, 4 KB gzip'd and chunked: one read, judged while it is written against
    /// the most a read can hold (libcurl has not counted it yet), is within the limit; the
    /// body as a whole, 1000:1, is refused when it ends.
    func testAChunkedBombWholeInOneReadIsRefusedAtItsEnd() async throws {
        var bomb = TestResponse(status: 200, headers: [("Content-Encoding", "gzip")], body: try Self.gzippedZeros(megabytes: 4))
        bomb.framing = .chunked
        server.route("/small-bomb", response: bomb)
        let response = await manager.response(for: URLRequest(url: try server.url("/small-bomb")))
        XCTAssertEqual(response.error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        XCTAssertNil(response.data)
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
        // Reads of up to 256 KiB: the bounds the guard judges an uncounted chunked read by
        // (and what a pause-buffer overflow is judged against) are that size.
        configuration.receiveBufferSize = 256 << 10
        manager = URLSessionManager.raw(configuration)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        server.shutdown()
    }

    /// The lines `line(0)`, `line(1)`, ... until there are at least `size` bytes.
    private static func lines(upTo size: Int, _ line: (Int) -> String) -> Data {
        var text = Data()
        var index = 0
        while text.count < size {
            text.append(Data(line(index).utf8))
            index += 1
        }
        return text
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

    /// 200 MiB of zeros gzip'd twice (606 bytes): one socket read decodes to more than
    /// libcurl's pause buffer holds, always (gzip'd once, 1000:1, a read of 64 KiB decodes to
    /// just about that, and the guard may refuse it while the consumer keeps up). The guard
    /// names the bomb; it is not libcurl's "out of memory" (which event streams took as a
    /// reason to connect again).
    func testABombStreamedToAConsumerThatIsBehindIsRefusedByTheGuard() async throws {
        server.route("/bomb", response: TestResponse(
            status: 200, headers: [("Content-Encoding", "gzip, gzip")], body: try Self.doublyGzippedZeros()))
        let (error, received) = try await streamBehind("/bomb")
        XCTAssertEqual(error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        XCTAssertLessThan(received, 64 << 20, "the bomb went to the consumer")
    }

    /// 200 MiB of zeros gzip'd twice, 606 bytes: any read of it decodes to more than 64 MiB.
    private static func doublyGzippedZeros() throws -> Data {
        try Gzip.output(of: "head -c 200M /dev/zero | gzip -c -9 | gzip -c -9")
    }

    /// A bomb under a limit that allows it: libcurl's pause buffer overflows all the same, and
    /// the error says so (not the system's memory running out).
    func testAPauseBufferOverflowWithinAGenerousLimitIsNamed() async throws {
        try await assertPauseBufferOverflowIsNamed(limit: 1 << 40, framing: .contentLength)
    }

    /// A chunked body's received bytes are counted by libcurl only after each read was decoded
    /// and written, and not at all when its pause buffer overflowed: the overflow is judged
    /// against the most that read could hold (256 KiB, 256:1 for 64 MiB, within a limit of
    /// 2000), not against the reads before it (none: "a bomb" at any limit). The bomb itself
    /// is 346,000:1, but how much of the 256 KiB read it filled is not known: the bound is
    /// the conservative answer, which this pins.
    func testAChunkedPauseBufferOverflowIsJudgedAgainstTheWholeRead() async throws {
        try await assertPauseBufferOverflowIsNamed(limit: 2000, framing: .chunked)
    }

    private func assertPauseBufferOverflowIsNamed(
        limit: Int, framing: TestResponse.Framing, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.receiveBufferSize = 256 << 10
        configuration.decompressionLimit = limit
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = URLSessionManager.raw(configuration)
        var response = TestResponse(status: 200, headers: [("Content-Encoding", "gzip, gzip")], body: try Self.doublyGzippedZeros())
        response.framing = framing
        server.route("/bomb", response: response)
        let (error, _) = try await streamBehind("/bomb")
        guard case .curl(let code, let message)? = error as? SessionError else {
            return XCTFail("expected libcurl's out of memory, got \(String(describing: error))", file: file, line: line)
        }
        XCTAssertEqual(code, 27, file: file, line: line)
        XCTAssertTrue(message.contains("64 MiB libcurl keeps for a paused transfer"), message, file: file, line: line)
    }

    /// JSON lines gzip'd about 24:1, chunked, read up to 256 KiB at a time: the first read of
    /// the body (over 43 KB of it, as loopback hands over) decodes to more than the 1 MiB always
    /// accepted, before libcurl has counted any received byte of a chunked body. Judged
    /// against nothing, that read was refused as a bomb.
    func testAChunkedGzippedBodyWithinTheLimitIsNotRefusedAtItsFirstRead() async throws {
        let text = Self.lines(upTo: 8 << 20) { "{\"id\": \($0 * 7919 % 1000), \"name\": \"item\", \"tags\": [\"a\", \"b\"], \"ok\": true}\n" }
        var response = TestResponse(status: 200, headers: [("Content-Encoding", "gzip")], body: try Gzip.compress(text))
        response.framing = .chunked
        server.route("/items", response: response)
        let received = await manager.response(for: URLRequest(url: try server.url("/items")))
        XCTAssertNil(received.error)
        XCTAssertEqual(received.data?.count, text.count)
    }

    /// 4 MiB of zeros, 4 KB gzip'd, in one read; the gzip trailer (8 bytes) follows 30 s
    /// later. The guard's refusal comes while libcurl hands over what it kept during the
    /// pause, and that ends the task then: not when the server next sends something, or the
    /// silence probe finds nothing, with the rest of the body dropped behind its back.
    func testABombWholeInThePauseBufferIsRefusedWhenItIsHandedOver() async throws {
        let bodyBytes = try routeSmallBomb()
        let (error, _) = try await streamBehind("/small-bomb")
        try assertRefusedAtHandOver(error, bodyBytes: bodyBytes)
    }

    /// The same bomb kept while a response hook decides: handed over when it allows the body.
    func testABombKeptWhileTheResponseHookDecidesIsRefusedWhenItIsHandedOver() async throws {
        let bodyBytes = try routeSmallBomb()
        manager.setDataTaskDidReceiveResponseBlock { _, _ in
            Thread.sleep(forTimeInterval: 0.3)  // not an assertion: the body arrives meanwhile
            return .allow
        }
        let response = await manager.response(for: URLRequest(url: try server.url("/small-bomb")))
        try assertRefusedAtHandOver(response.error, bodyBytes: bodyBytes)
    }

    /// The same bomb kept while the task is suspended: handed over by `resume()`.
    func testABombKeptWhileTheTaskIsSuspendedIsRefusedWhenItIsResumed() async throws {
        let bodyBytes = try routeSmallBomb()
        let suspended = Mutex<DataTask?>(nil)
        manager.setDataTaskDidReceiveResponseBlock { task, _ in
            task.suspend()
            suspended.withLock { $0 = task }
            return .allow
        }
        let request = URLRequest(url: try server.url("/small-bomb"))
        let error: Error? = await withCheckedContinuation { continuation in
            manager.dataTask(with: request) { continuation.resume(returning: $0.error) }.resume()
            XCTAssertTrue(server.wait { _ in suspended.withLock { $0 } != nil })
            Thread.sleep(forTimeInterval: 0.3)  // not an assertion: the body arrives meanwhile
            suspended.withLock { $0 }?.resume()
        }
        try assertRefusedAtHandOver(error, bodyBytes: bodyBytes)
    }

    /// Routes /small-bomb (see above); returns where the task's received body bytes are noted
    /// when its metrics are collected.
    private func routeSmallBomb() throws -> SmallBomb {
        let bomb = try FaultBodyLimitTests.gzippedZeros(megabytes: 4)
        var response = TestResponse(status: 200, headers: [("Content-Encoding", "gzip")])
        response.body = .stream([
            TestResponse.Chunk(bomb.prefix(bomb.count - 8)), TestResponse.Chunk(bomb.suffix(8), delay: .seconds(30)),
        ])
        response.framing = .chunked
        server.route("/small-bomb", response: response)
        let received = SmallBomb(size: bomb.count)
        manager.setTaskDidFinishCollectingMetricsBlock { _, metrics in
            received.bodyBytes.withLock { $0 = metrics?.transactionMetrics.last?.responseBodyBytesReceived }
        }
        return received
    }

    private final class SmallBomb: Sendable {
        let size: Int
        let bodyBytes = Mutex<Int64?>(nil)
        init(size: Int) { self.size = size }
    }

    private func assertRefusedAtHandOver(
        _ error: Error?, bodyBytes: SmallBomb, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        XCTAssertEqual(error as? SessionError, .decompressionLimitExceeded(ratio: 100), file: file, line: line)
        XCTAssertEqual(manager.engine.silenceProbes.load(ordering: .relaxed), 0, "the refused replay waited for the silence probe", file: file, line: line)
        // Whatever libcurl does after a refused replay: the task did not wait for the trailer.
        XCTAssertTrue(server.wait { _ in bodyBytes.bodyBytes.withLock { $0 } != nil }, file: file, line: line)
        XCTAssertEqual(bodyBytes.bodyBytes.withLock { $0 }, Int64(bodyBytes.size - 8), "the task ended only when the trailer came", file: file, line: line)
    }

    /// Within the limit (text compresses about 5:1 here), a paused and resumed gzip'd stream
    /// delivers every byte once: what the guard counts at a refusal is not counted again when
    /// libcurl hands the chunk over a second time.
    func testAGzippedStreamWithinTheLimitArrivesWholeThroughPauses() async throws {
        let text = Self.lines(upTo: 3 << 20) { "line \($0) of a log that repeats itself a little but not entirely, \($0 * 7919 % 1000)\n" }
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
