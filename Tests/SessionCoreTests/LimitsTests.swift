import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Timeouts, memory and the limits that protect a client from a hostile server.
final class LimitsTests: XCTestCase {
    var manager: URLSessionManager!
    var servers: [TestServer] = []

    override func setUp() { manager = URLSessionManager.raw() }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        for server in servers { server.shutdown() }
        servers = []
    }

    func server(fault: TestServerFault? = nil) throws -> TestServer {
        let server = try TestServer(fault: fault)
        servers.append(server)
        return server
    }

    func testServerThatAcceptsAndNeverAnswersTimesOut() async throws {
        let silent = try server(fault: .acceptAndNeverRespond)
        var request = URLRequest(url: try silent.url("/never"))
        request.timeoutInterval = 1
        let response = await manager.response(for: request)
        guard case .timedOut(let message)? = response.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: response.error))")
        }
        XCTAssertFalse(message.isEmpty)
        XCTAssertEqual(silent.acceptedConnectionCount, 1)
    }

    func testResourceTimeoutBoundsTheWholeTask() async throws {
        let slow = try server()
        slow.route("/drip", response: .stream((0..<20).map { _ in .init(Data("x".utf8), delay: .milliseconds(250)) }))
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForResource = 1
        let strict = URLSessionManager.raw(configuration)
        let response = await strict.response(for: URLRequest(url: try slow.url("/drip")))
        guard case .timedOut? = response.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: response.error))")
        }
        strict.invalidateSessionCancelingTasks(true, resetSession: false)
        await strict.waitUntilInvalidated()
    }

    func testTwoHundredMegabytesStreamThroughTheDataPathWithFlatMemory() async throws {
        try XCTSkipIf(Sanitizers.address, "AddressSanitizer's quarantine holds freed memory: resident size says nothing here")
        let total = 200 * 1024 * 1024
        let streaming = try StreamingServer(bytes: total)
        let received = Mutex(0)
        let checksum = Mutex<UInt64>(0)
        XCTAssertTrue(MemoryStatus.resetPeak())
        let baseline = try XCTUnwrap(MemoryStatus.value("VmRSS"))
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.dataTask(
                with: URLRequest(url: URL(string: "http://127.0.0.1:\(streaming.port)/big")!),
                dataHandler: { chunk in
                    received.withLock { $0 += chunk.count }
                    checksum.withLock { sum in chunk.withUnsafeBytes { for byte in $0 { sum &+= UInt64(byte) } } }
                },
                completionHandler: { continuation.resume(returning: $0) }
            ).resume()
        }
        let peak = try XCTUnwrap(MemoryStatus.value("VmHWM"))
        XCTAssertNil(response.error)
        XCTAssertEqual(received.withLock { $0 }, total)
        let pattern = (0..<65536).reduce(UInt64(0)) { $0 &+ UInt64(UInt8(truncatingIfNeeded: $1 &* 7)) }
        XCTAssertEqual(checksum.withLock { $0 }, pattern &* UInt64(total / 65536))
        let growthMB = Double(peak - baseline) / 1024
        print("200 MB streamed: peak RSS grew \(String(format: "%.1f", growthMB)) MB")
        // Backpressure caps what waits in user code at 4 MiB; curl's buffers add little.
        XCTAssertLessThan(growthMB, 24, "memory grew with the body")
    }

    /// A large body, announced or chunked, goes to a mapping of its own (`ResponseBody`) and
    /// reaches the completion handler whole and in order.
    func testLargeBodiesArriveWholeWithAndWithoutALength() async throws {
        let server = try server()
        // 40 distinct MiB (each starts with its index), so a misplaced chunk is caught.
        let mebibyte = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        var body = Data(capacity: 40 << 20)
        for index in 0..<40 {
            body.append(UInt8(index))
            body.append(mebibyte.dropFirst())
        }
        let served = body
        server.route("/big") { _ in TestResponse(status: 200, body: served) }
        server.route("/chunked") { _ in TestResponse(status: 200, body: .data(served), framing: .chunked) }
        let response = await manager.response(for: URLRequest(url: try server.url("/big")))
        XCTAssertNil(response.error)
        XCTAssertEqual(response.head?.expectedContentLength, Int64(body.count))
        XCTAssertEqual(response.data?.count, body.count)
        XCTAssertTrue(response.data == body, "the bytes differ")
        let chunked = await manager.response(for: URLRequest(url: try server.url("/chunked")))
        XCTAssertNil(chunked.error)
        XCTAssertEqual(chunked.head?.expectedContentLength, -1)
        XCTAssertTrue(chunked.data == body, "the chunked body's bytes differ")
    }

    /// A server that announces a terabyte and sends 20 MiB: the transfer fails as a short
    /// body, and the announcement cost no memory beyond what arrived.
    func testAnAnnouncedTerabyteThatNeverComesFailsCleanly() async throws {
        let server = try server()
        let sent = Data(repeating: 0x61, count: 20 << 20)
        server.route("/liar") { _ in
            TestResponse(
                status: 200, headers: [("Content-Length", "1099511627776")], body: .data(sent),
                framing: .closeDelimited, ending: .close)
        }
        XCTAssertTrue(MemoryStatus.resetPeak(), "needs /proc/self/clear_refs (Linux ≥ 4.0)")
        let baseline = try XCTUnwrap(MemoryStatus.value("VmRSS"))
        let response = await manager.response(for: URLRequest(url: try server.url("/liar")))
        let peak = try XCTUnwrap(MemoryStatus.value("VmHWM"))
        XCTAssertNotNil(response.error, "a body 1 TB short is not a success")
        XCTAssertLessThan(Double(peak - baseline) / 1024, 512, "MB of peak RSS growth for 20 MiB received")
    }

    func testOversizedResponseHeadIsRefused() async throws {
        let server = try server()
        let huge = String(repeating: "a", count: 8_000)
        server.route("/huge") { _ in
            TestResponse(status: 200, headers: (0..<40).map { ("X-Filler-\($0)", huge) }, body: Data("ok".utf8))
        }
        var configuration = SessionConfiguration.default
        configuration.maximumResponseHeaderBytes = 64 * 1024
        let strict = URLSessionManager.raw(configuration)
        let refused = await strict.response(for: URLRequest(url: try server.url("/huge")))
        XCTAssertEqual(refused.error as? SessionError, .responseHeadersTooLarge(limit: 64 * 1024))
        // Positive control: a 32 KB head fits the same limit.
        server.route("/fits") { _ in
            TestResponse(status: 200, headers: (0..<4).map { ("X-Filler-\($0)", huge) }, body: Data("ok".utf8))
        }
        let accepted = await strict.response(for: URLRequest(url: try server.url("/fits")))
        XCTAssertNil(accepted.error)
        XCTAssertEqual(accepted.data, Data("ok".utf8))
        strict.invalidateSessionCancelingTasks(true, resetSession: false)
        await strict.waitUntilInvalidated()
    }

    func testCompressionBombIsRefusedBeforeItFillsMemory() async throws {
        let server = try server()
        let bomb = try gzip(Data(count: 64 * 1024 * 1024))  // 64 MiB of zeros → ~64 KB
        XCTAssertLessThan(bomb.count, 200_000)
        server.route("/bomb", response: TestResponse(
            status: 200, headers: [("Content-Encoding", "gzip"), ("Content-Type", "application/octet-stream")], body: bomb))
        let small = try gzip(Data(repeating: 65, count: 10_000))
        server.route("/fine", response: TestResponse(status: 200, headers: [("Content-Encoding", "gzip")], body: small))

        let refused = await manager.response(for: URLRequest(url: try server.url("/bomb")))
        XCTAssertEqual(refused.error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        let accepted = await manager.response(for: URLRequest(url: try server.url("/fine")))
        XCTAssertNil(accepted.error)
        XCTAssertEqual(accepted.data, Data(repeating: 65, count: 10_000))
    }

    /// A byte range of a content-coded representation (a server that serves `file.gz` as
    /// `file` with `Content-Encoding: gzip` and honours ranges of it) is bytes of the encoded
    /// form, which cannot be decoded from the middle: a request with a `Range` asks for no
    /// coding and gets the range as sent. It failed with "unknown compression method" until
    /// 2026-11-27. A caller who names codings with the range keeps them.
    func testAByteRangeOfACodedRepresentationArrivesAsSent() async throws {
        let server = try server()
        let encoded = try gzip(Data(repeating: 66, count: 100_000))
        let slice = encoded.subdata(in: 10..<60)
        server.route("/coded") { _ in
            TestResponse(
                status: 206, headers: [("Content-Encoding", "gzip"), ("Content-Range", "bytes 10-59/\(encoded.count)")],
                body: slice)
        }
        var request = URLRequest(url: try server.url("/coded"))
        request.setValue("bytes=10-59", forHTTPHeaderField: "Range")
        let ranged = await manager.response(for: request)
        XCTAssertNil(ranged.error)
        XCTAssertEqual(ranged.response?.statusCode, 206)
        XCTAssertEqual(ranged.data, slice)
        XCTAssertNil(server.requests.last?.header("Accept-Encoding"))

        request.setValue("gzip", forHTTPHeaderField: "Accept-Encoding")
        _ = await manager.response(for: request)
        XCTAssertEqual(server.requests.last?.header("Accept-Encoding"), "gzip", "the caller's own list is sent")
        let whole = await manager.response(for: URLRequest(url: try server.url("/coded")))
        XCTAssertNotNil(server.requests.last?.header("Accept-Encoding"), "without a range, codings are asked for: \(whole.result)")

        // A redirect keeps the range, and the hop asks for no coding either.
        server.route("/moved", response: TestResponse(status: 302, headers: [("Location", "/coded")], body: Data()))
        var moved = URLRequest(url: try server.url("/moved"))
        moved.setValue("bytes=10-59", forHTTPHeaderField: "Range")
        let followed = await manager.response(for: moved)
        XCTAssertNil(followed.error)
        XCTAssertEqual(followed.data, slice)
        XCTAssertEqual(server.requests.last?.uri, "/coded")
        XCTAssertNil(server.requests.last?.header("Accept-Encoding"))
    }

    /// A bomb in a body the task never sees (a redirect's, a 401 held back for the challenge
    /// handler) is counted too: curl would otherwise inflate it all on the driver thread.
    func testCompressionBombInARedirectOrChallengedBodyIsRefused() async throws {
        let server = try server()
        let bomb = try gzip(Data(count: 64 * 1024 * 1024))
        server.route("/moved", response: TestResponse(
            status: 302, headers: [("Location", "/fine"), ("Content-Encoding", "gzip")], body: bomb))
        server.route("/locked", response: TestResponse(
            status: 401, headers: [("WWW-Authenticate", "Basic realm=\"x\""), ("Content-Encoding", "gzip")], body: bomb))
        server.route("/fine", response: .text("fine"))
        let redirected = await manager.response(for: URLRequest(url: try server.url("/moved")))
        XCTAssertEqual(redirected.error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        XCTAssertFalse(server.requests.contains { $0.path == "/fine" }, "the bomb's redirect was followed")

        manager.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling }
        let challenged = await manager.response(for: URLRequest(url: try server.url("/locked")))
        XCTAssertEqual(challenged.error as? SessionError, .decompressionLimitExceeded(ratio: 100))
    }

    func testSuspendAndResumeDeliverTheWholeBody() async throws {
        let server = try server()
        server.route("/slow", response: .stream((0..<10).map { index in
            .init(Data(repeating: UInt8(index), count: 1000), delay: .milliseconds(50))
        }))
        let task = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        try await Task.sleep(nanoseconds: 120_000_000)
        task.suspend()
        XCTAssertEqual(task.state, .suspended)
        try await Task.sleep(nanoseconds: 300_000_000)
        task.resume()
        XCTAssertEqual(task.state, .running)
        await fulfillment(of: [done], timeout: 10)
        XCTAssertNil(task.error)
        XCTAssertEqual(task.countOfBytesReceived, 10_000)
    }

    func testZstdBodiesAreDecodedTransparently() async throws {
        let server = try server()
        let original = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 % 251) })
        server.route("/zstd", response: TestResponse(
            status: 200, headers: [("Content-Encoding", "zstd")], body: try compress(original, with: "/usr/bin/zstd")))
        let response = await manager.response(for: URLRequest(url: try server.url("/zstd")))
        XCTAssertNil(response.error)
        XCTAssertEqual(response.data, original)
        let sent = try XCTUnwrap(server.requests.last?.header("Accept-Encoding"))
        XCTAssertTrue(sent.contains("zstd") && sent.contains("br") && sent.contains("gzip"), sent)
    }

    private func gzip(_ data: Data) throws -> Data { try compress(data, with: "/bin/gzip") }

    /// Compresses with a system tool (gzip(1), zstd(1)) reading standard input.
    private func compress(_ data: Data, with tool: String) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["-c", "-9"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let writer = Thread { input.fileHandleForWriting.write(data); try? input.fileHandleForWriting.close() }
        writer.start()
        let compressed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return compressed
    }
}
