import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `upload(for:from:)`: a request body from an async sequence, read ahead through a bounded
/// buffer by a task of Curlew's, never on the driver thread.
final class UploadSequenceTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!

    override func setUp() async throws {
        manager = URLSessionManager.raw()
        server = try TestServer()
        // Echoes what arrived: the body's length, its framing and a checksum.
        server.route("/echo") { request in
            let sum = request.body.reduce(UInt64(0)) { ($0 &* 31) &+ UInt64($1) }
            let framing = request.header("Transfer-Encoding") ?? "length \(request.header("Content-Length") ?? "none")"
            return .text("\(request.body.count) \(sum) \(framing)")
        }
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
        server = nil
    }

    private func chunks(count: Int, size: Int) -> (AsyncStream<Data>, Data) {
        var all = Data()
        var pieces: [Data] = []
        for index in 0..<count {
            let piece = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ index) })
            pieces.append(piece)
            all.append(piece)
        }
        let stream = AsyncStream<Data> { continuation in
            for piece in pieces { continuation.yield(piece) }
            continuation.finish()
        }
        return (stream, all)
    }

    private func expected(_ body: Data, _ framing: String) -> String {
        "\(body.count) \(body.reduce(UInt64(0)) { ($0 &* 31) &+ UInt64($1) }) \(framing)"
    }

    private func post() throws -> URLRequest {
        var request = URLRequest(url: try server.url("/echo"))
        request.httpMethod = "POST"
        return request
    }

    func testASequenceWithoutALengthGoesOutChunked() async throws {
        let (stream, body) = chunks(count: 40, size: 10_000)
        let (data, response) = try await manager.upload(for: try post(), from: stream)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(String(decoding: data, as: UTF8.self), expected(body, "chunked"))
    }

    func testASequenceWithALengthGoesOutWithContentLength() async throws {
        let (stream, body) = chunks(count: 10, size: 1_000)
        let (data, _) = try await manager.upload(for: try post(), from: stream, length: Int64(body.count))
        XCTAssertEqual(String(decoding: data, as: UTF8.self), expected(body, "length \(body.count)"))
    }

    func testASixteenMegabyteSequenceArrivesIntact() async throws {
        let total = 16 << 20
        let piece = Data(repeating: 0x5A, count: 64 << 10)
        let stream = AsyncStream<Data> { continuation in
            for _ in 0..<(total / piece.count) { continuation.yield(piece) }
            continuation.finish()
        }
        let (data, _) = try await manager.upload(for: try post(), from: stream)
        XCTAssertEqual(String(decoding: data, as: UTF8.self), expected(Data(repeating: 0x5A, count: total), "chunked"))
    }

    func testTheProducerReadsAheadOnlyAsFarAsTheBuffer() async throws {
        // A pull-driven sequence: each chunk is made only when asked for. Nobody takes from
        // the feed after its first read, so the producer must stop near the capacity.
        let produced = Mutex(0)
        let endless = AsyncStream<Data> {
            produced.withLock { $0 += 1 }
            return Data(repeating: 7, count: 4_096)
        }
        let feed = AsyncBodyFeed(length: nil, capacity: 64 << 10, produce: AsyncBodyFeed.producing(endless))
        defer { feed.cancel() }
        var scratch = [UInt8](repeating: 0, count: 16)
        let first = scratch.withUnsafeMutableBytes { feed.take(into: $0) }
        XCTAssertEqual(first, .wait, "the first read starts the producer and waits for it")
        var previous = -1
        var stableRounds = 0
        for _ in 0..<300 where stableRounds < 10 {  // bounded: at most 30 s
            try await Task.sleep(nanoseconds: 100_000_000)
            let now = produced.withLock { $0 }
            stableRounds = now == previous ? stableRounds + 1 : 0
            previous = now
        }
        XCTAssertEqual(stableRounds, 10, "the producer never stopped")
        // 64 KiB of 4 KiB chunks is 16; one more is in the producer's hands when it waits.
        XCTAssertLessThanOrEqual(produced.withLock { $0 }, 18)
        XCTAssertGreaterThanOrEqual(produced.withLock { $0 }, 16)
        // Taking drains the buffer and wakes the producer for more.
        var big = [UInt8](repeating: 0, count: 64 << 10)
        XCTAssertEqual(big.withUnsafeMutableBytes { feed.take(into: $0) }, .bytes(64 << 10))
        try await eventually({ produced.withLock { $0 } > 18 }, "draining must wake the producer")
    }

    func testASequenceThatThrowsFailsTheTransfer() async throws {
        struct Broken: Error {}
        let stream = AsyncThrowingStream<Data, any Error> { continuation in
            continuation.yield(Data("partial".utf8))
            continuation.finish(throwing: Broken())
        }
        do {
            _ = try await manager.upload(for: try post(), from: stream)
            XCTFail("a throwing body must fail the upload")
        } catch let error as SessionError {
            guard case .bodyStreamFailed(let reason) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(reason.contains("Broken"), reason)
        }
    }

    func testASequenceShorterThanItsLengthFails() async throws {
        let (stream, body) = chunks(count: 2, size: 100)
        do {
            _ = try await manager.upload(for: try post(), from: stream, length: Int64(body.count + 1))
            XCTFail("a body shorter than its Content-Length must fail")
        } catch let error as SessionError {
            guard case .bodyStreamFailed = error else { return XCTFail("unexpected \(error)") }
        }
    }

    func testASequenceLongerThanItsLengthMakesTheCallThrow() async throws {
        let (stream, body) = chunks(count: 4, size: 1_000)
        do {
            _ = try await manager.upload(for: try post(), from: stream, length: Int64(body.count - 500))
            XCTFail("a body longer than its Content-Length must not pass for complete")
        } catch let error as SessionError {
            guard case .bodyStreamFailed(let reason) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(reason.contains("longer"), reason)
        }
    }

    /// A server that answers before it read the body (a 413 at the head) stops the upload
    /// half way: what the sequence had read ahead is not a surplus, and the call returns the
    /// server's answer, with a declared length as without.
    func testAnAnswerBeforeTheBodyWasReadIsTheCallsResultNotASurplus() async throws {
        let server = try ScriptedServer { socket, server in
            guard server.readHead(socket) != nil else { return }
            _ = server.write(socket, "HTTP/1.1 413 Content Too Large\r\nContent-Length: 5\r\nConnection: close\r\n\r\nearly")
            shutdown(socket, Int32(SHUT_WR))  // FIN after the answer; read what is still coming
            var sink = [UInt8](repeating: 0, count: 65536)
            for _ in 0..<100_000 where recv(socket, &sink, sink.count, 0) > 0 {}
        }
        defer { server.stop() }
        var request = URLRequest(url: try XCTUnwrap(URL(string: "\(server.baseURLString)/upload")))
        request.httpMethod = "PUT"
        for length in [Int64(64 << 20), nil] {
            // 64 MiB offered as fast as the buffer takes it: far more than loopback holds.
            let piece = Data(repeating: UInt8(ascii: "u"), count: 64 << 10)
            let body = AsyncStream<Data> { continuation in
                for _ in 0..<1024 { continuation.yield(piece) }
                continuation.finish()
            }
            do {
                let (data, response) = try await manager.upload(for: request, from: body, length: length)
                XCTAssertEqual(response.statusCode, 413)
                XCTAssertEqual(data, Data("early".utf8))
            } catch SessionError.networkLost {
                // The server's close may reach the sender before its answer is read: allowed.
            } catch {
                XCTFail("length \(length.map(String.init) ?? "none"): \(error)")
            }
        }
    }

    func testCancellingTheCallerStopsTheProducer() async throws {
        // A producer that never ends: cancelling the upload must cancel its iteration.
        let iterations = Mutex(0)
        let endless = AsyncStream<Data> {
            iterations.withLock { $0 += 1 }
            try? await Task.sleep(nanoseconds: 20_000_000)
            return Data(repeating: 1, count: 1_000)
        }
        let request = try post()
        let upload = Task { [manager] in try await manager!.upload(for: request, from: endless) }
        try await eventually({ iterations.withLock { $0 } > 3 }, "the producer must start")
        upload.cancel()
        do {
            _ = try await upload.value
            XCTFail("a cancelled upload must throw")
        } catch {
            XCTAssertEqual(error as? SessionError, .cancelled)
        }
        let afterCancel = iterations.withLock { $0 }
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertLessThanOrEqual(iterations.withLock { $0 }, afterCancel + 1, "the producer kept running after the upload ended")
    }

    func testARedirectThatNeedsTheBodyAgainFailsClearly() async throws {
        server.route("/moved", response: .redirect(to: "/echo", status: 307))
        var request = URLRequest(url: try server.url("/moved"))
        request.httpMethod = "POST"
        let (stream, _) = chunks(count: 4, size: 1_000)
        do {
            _ = try await manager.upload(for: request, from: stream)
            XCTFail("a 307 cannot replay a sequence that was read")
        } catch let error as SessionError {
            guard case .bodyStreamFailed = error else { return XCTFail("unexpected \(error)") }
        }
    }

    /// The silence probe meets a request body that waits for its producer: lifting the
    /// receive pause also wakes the body's read (`CURL_READFUNC_PAUSE`), which pauses again
    /// with nothing to send; when the producer goes on, the body arrives whole and in order.
    func testAProbeWhileTheBodyWaitsForItsProducerLosesAndRepeatsNothing() async throws {
        try XCTSkipUnless(CurlRuntime.strandsBufferedStreamInput, "this libcurl needs no probes")
        let first = Data((0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let second = Data((0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 1) })
        let engine = try XCTUnwrap(manager).engine
        let stream = AsyncStream<Data> { continuation in
            Task {
                continuation.yield(first)
                // Waits (bounded) until the driver has probed the silent upload at least once.
                for _ in 0..<600 where engine.silenceProbes.load(ordering: .relaxed) == 0 {
                    try? await Task.sleep(nanoseconds: 50_000_000)
                }
                continuation.yield(second)
                continuation.finish()
            }
        }
        let (data, response) = try await manager.upload(for: try post(), from: stream)
        XCTAssertGreaterThan(engine.silenceProbes.load(ordering: .relaxed), 0, "the waiting upload was probed")
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(String(decoding: data, as: UTF8.self), expected(first + second, "chunked"))
    }

    /// A producer slower than the timeout: while the server waits for the rest of the request,
    /// the wait is the caller's pace, not the server's silence (held like a slow consumer's);
    /// until 2026-11-27 the upload ended with `.timedOut` after one second.
    func testAProducerSlowerThanTheTimeoutIsNotTimedOut() async throws {
        let first = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 3) })
        let second = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 5 &+ 1) })
        let stream = AsyncStream<Data> { continuation in
            Task {
                continuation.yield(first)
                try? await Task.sleep(nanoseconds: 2_500_000_000)
                continuation.yield(second)
                continuation.finish()
            }
        }
        var request = try post()
        request.timeoutInterval = 1
        let (data, response) = try await manager.upload(for: request, from: stream)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(String(decoding: data, as: UTF8.self), expected(first + second, "chunked"))
    }

    /// Once the server answered, its silence counts again: a two-way stream whose server sent
    /// its head and a first chunk, then nothing, while the producer waits for the caller, ends
    /// with `.timedOut` after the timeout (the request body's wait does not hold it any more).
    func testAfterTheHeadTheServersSilenceTimesOutWhileTheProducerWaits() async throws {
        let server = try ScriptedServer(connections: 1) { socket, server in
            guard server.readHead(socket) != nil else { return }
            server.write(socket, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
            while server.readSome(socket) {}  // silent until the client closes
        }
        defer { server.stop() }
        let producerWentOn = Flag()
        let stream = AsyncStream<Data> { continuation in
            let producer = Task {
                continuation.yield(Data("first".utf8))
                // The caller has nothing more for 30 s (cancelled with the transfer).
                guard (try? await Task.sleep(nanoseconds: 30_000_000_000)) != nil else { return }
                producerWentOn.value.store(true, ordering: .releasing)
                continuation.finish()
            }
            continuation.onTermination = { _ in producer.cancel() }
        }
        var request = URLRequest(url: try XCTUnwrap(URL(string: server.baseURLString + "/talk")))
        request.httpMethod = "POST"
        request.timeoutInterval = 1
        let (bytes, response) = try await manager.bytes(for: request, uploading: stream)
        XCTAssertEqual(response.statusCode, 200)
        var received = Data()
        do {
            for try await chunk in bytes { received += chunk }
            XCTFail("the stream ended without an error")
        } catch let error as SessionError {
            guard case .timedOut = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "hello")
        XCTAssertFalse(producerWentOn.value.load(ordering: .acquiring), "timed out only once the producer went on")
    }

    /// A flag a producer task sets.
    private final class Flag: Sendable { let value = Atomic<Bool>(false) }

    func testStreamingBothWays() async throws {
        let (stream, body) = chunks(count: 8, size: 4_096)
        let (bytes, response) = try await manager.bytes(for: try post(), uploading: stream)
        XCTAssertEqual(response.statusCode, 200)
        var data = Data()
        for try await chunk in bytes { data.append(chunk) }
        XCTAssertEqual(String(decoding: data, as: UTF8.self), expected(body, "chunked"))
    }
}
