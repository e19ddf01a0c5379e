import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `bytes(for:)` and `lines(for:)`: the body as an async sequence, with backpressure through
/// libcurl's pause, and the transfer cancelled as soon as nobody reads.
final class ResponseStreamTests: XCTestCase {
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
        server = nil
    }

    private func streamed(_ pieces: [String], delay: Duration = .zero, ending: TestResponse.Ending = .complete,
                          status: Int = 200, contentType: String = "text/plain") -> TestResponse {
        var response = TestResponse(status: status, headers: [("Content-Type", contentType)])
        response.body = .stream(pieces.map { TestResponse.Chunk(Data($0.utf8), delay: delay) })
        response.framing = .chunked
        response.ending = ending
        return response
    }

    /// Counts completions, cancels and failures, on its own queue.
    private final class Ends: EventMonitor {
        let completed = Mutex<[String]>([])
        let cancels = Mutex(0)
        func taskDidCancel(_ task: SessionTask) { cancels.withLock { $0 += 1 } }
        func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) {
            completed.withLock { $0.append(error.map { "\($0)" } ?? "ok") }
        }
    }

    /// A small announced body left unread is read to its end rather than cancelled (its bytes
    /// usually came with the head), in many small reads: the chunks that come for nobody give
    /// their credit back, so the transfer never pauses. Paused, it waited for a consumer that
    /// was gone, its idle clock stopped, until the resource timeout.
    func testASmallBodyLeftUnreadInManyPiecesEndsByItself() async throws {
        let ends = Ends()
        let monitored = URLSessionManager(configuration: manager.engine.configuration, eventMonitors: [ends])
        defer { monitored.invalidateSessionCancelingTasks(true, resetSession: false) }
        var response = TestResponse(status: 200, headers: [("Content-Type", "text/plain")])
        response.body = .stream((0..<40).map { _ in TestResponse.Chunk(Data(repeating: 0x61, count: 100), delay: .milliseconds(5)) })
        response.framing = .contentLength
        server.route("/pieces", response: response)
        do {
            // 40 reads of 100 bytes, each charged 256 against a 4 KiB buffer: 10 KiB of credit.
            let (bytes, head) = try await monitored.bytes(for: URLRequest(url: try server.url("/pieces")), bufferSize: 4096)
            XCTAssertEqual(head.statusCode, 200)
            _ = bytes  // dropped unread here
        }
        for _ in 0..<3000 where ends.completed.withLock({ $0.isEmpty }) { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(ends.completed.withLock { $0 }, ["ok"], "the transfer ended by itself, whole")
        XCTAssertEqual(ends.cancels.withLock { $0 }, 0)
    }

    func testBytesReturnAtTheHeadAndDeliverTheWholeBody() async throws {
        server.route("/body", response: streamed(["hello, ", "streaming ", "world"]))
        let (bytes, response) = try await manager.bytes(for: URLRequest(url: try server.url("/body")))
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Type"), "text/plain")
        var body = Data()
        for try await chunk in bytes { body.append(chunk) }
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "hello, streaming world")
        let task = try XCTUnwrap(bytes.task)
        try await eventually({ task.state == .completed }, "the transfer must end")
        XCTAssertNil(task.error)
    }

    func testTheHeadArrivesBeforeAnyBody() async throws {
        // The body's first byte waits until the caller has the head: `bytes(for:)` must not
        // wait for the body (an event stream may stay quiet for minutes).
        server.route("/late") { _ in
            var response = TestResponse(status: 200, headers: [("Content-Type", "text/plain")])
            response.body = .stream([TestResponse.Chunk(Data("late".utf8), delay: .seconds(600))])
            response.framing = .chunked
            return response
        }
        let (bytes, response) = try await manager.bytes(for: URLRequest(url: try server.url("/late")))
        XCTAssertEqual(response.statusCode, 200)
        bytes.task?.cancel()
    }

    func testAnErrorStatusIsAResponseWhoseBodyStreams() async throws {
        server.route("/missing", response: streamed(["not ", "here"], status: 404))
        let (bytes, response) = try await manager.bytes(for: URLRequest(url: try server.url("/missing")))
        XCTAssertEqual(response.statusCode, 404)
        var body = Data()
        for try await chunk in bytes { body.append(chunk) }
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "not here")
    }

    func testARedirectTheHookDeclinesIsTheStreamedResponse() async throws {
        var moved = TestResponse.redirect(to: "/elsewhere", status: 302)
        moved.body = .data(Data("see elsewhere".utf8))
        server.route("/moved", response: moved)
        manager.setTaskWillPerformHTTPRedirectionBlock { _, _, _ in nil }
        let (bytes, response) = try await manager.bytes(for: URLRequest(url: try server.url("/moved")))
        XCTAssertEqual(response.statusCode, 302)
        XCTAssertEqual(bytes.responseHead?.statusCode, 302)
        var body = Data()
        for try await chunk in bytes { body.append(chunk) }
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "see elsewhere")
    }

    func testAFailureBeforeTheHeadIsThrownByBytes() async throws {
        let url = URL(string: "http://127.0.0.1:\(try LoopbackPort.closed())/nothing")!
        do {
            _ = try await manager.bytes(for: URLRequest(url: url))
            XCTFail("a refused connection must throw")
        } catch let error as SessionError {
            guard case .cannotConnect = error else { return XCTFail("unexpected \(error)") }
        }
    }

    func testATruncatedBodyYieldsWhatArrivedThenThrows() async throws {
        server.route("/cut", response: .fault(.truncatedBody(declaredLength: 100_000, sentLength: 5_000)))
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/cut")))
        var received = 0
        do {
            for try await chunk in bytes { received += chunk.count }
            XCTFail("a body cut short must end the iteration with an error")
        } catch is SessionError {
            XCTAssertEqual(received, 5_000, "the bytes that arrived come before the error")
        }
    }

    func testASlowConsumerPausesTheTransferAndMemoryStaysFlat() async throws {
        let total = 256 << 20
        let streaming = try StreamingServer(bytes: total)
        let url = URL(string: "http://127.0.0.1:\(streaming.port)/big")!
        let (bytes, response) = try await manager.bytes(for: URLRequest(url: url))
        XCTAssertEqual(response.expectedContentLength, Int64(total))
        var iterator = bytes.makeAsyncIterator()
        var received = try await iterator.next()?.count ?? 0
        // The consumer stops reading. Without backpressure libcurl would pull the whole
        // 256 MiB off loopback into memory within a second or two; with it the server's
        // writes stop once the buffer (1 MiB), libcurl's and the kernel's socket buffers fill.
        let baseline = MemoryStatus.value("VmRSS") ?? 0
        var previous = -1
        var stableRounds = 0
        for _ in 0..<600 where stableRounds < 10 {  // bounded: at most 60 s of polling
            try await Task.sleep(nanoseconds: 100_000_000)
            let now = streaming.bytesSent
            stableRounds = now == previous ? stableRounds + 1 : 0
            previous = now
        }
        XCTAssertEqual(stableRounds, 10, "the server's writes never stopped")
        XCTAssertLessThan(streaming.bytesSent, 64 << 20, "the server wrote far more than the buffers hold")
        let grown = (MemoryStatus.value("VmRSS") ?? 0) - baseline
        XCTAssertLessThan(grown, 32 * 1024, "RSS grew by \(grown) KiB while the consumer was stalled")
        // Reading on resumes the transfer to the end, every byte in order.
        while let chunk = try await iterator.next() { received += chunk.count }
        XCTAssertEqual(received, total)
    }

    func testBreakingOutOfTheLoopCancelsTheTransfer() async throws {
        server.route("/endless", response: streamed((0..<2_000).map { "line \($0)\n" }, delay: .milliseconds(50)))
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/endless")))
        let task = try XCTUnwrap(bytes.task)
        for try await _ in bytes { break }
        try await eventually({ task.state == .completed }, "leaving the loop must end the transfer")
        XCTAssertEqual(task.error as? SessionError, .cancelled)
        XCTAssertTrue(server.waitForAllConnectionsClosed(), "the connection must be closed, not drained")
    }

    func testCancellingTheConsumingTaskCancelsTheTransfer() async throws {
        server.route("/slow", response: streamed(["first\n", "second\n"], delay: .seconds(600)))
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/slow")))
        let task = try XCTUnwrap(bytes.task)
        let consumer = Task {
            var count = 0
            for try await chunk in bytes { count += chunk.count }
            return count
        }
        XCTAssertTrue(server.waitForRequests(count: 1))
        consumer.cancel()
        do {
            _ = try await consumer.value
            XCTFail("the cancelled consumer must throw")
        } catch {
            XCTAssertTrue(error is CancellationError || (error as? SessionError) == .cancelled, "\(error)")
        }
        try await eventually({ task.state == .completed }, "the transfer must end")
        XCTAssertEqual(task.error as? SessionError, .cancelled)
    }

    /// A caller whose `Task` is cancelled already gets the cancellation, and the request is
    /// never sent (`data(for:)` likewise: `AsyncCancelRaceTests`).
    func testACallFromACancelledTaskSendsNothing() async throws {
        server.route("/never", response: .text("ok"))
        let request = URLRequest(url: try server.url("/never"))
        for round in 0..<20 {
            let call = Task { [manager] () async throws -> Int in
                withUnsafeCurrentTask { $0?.cancel() }
                let (bytes, _) = try await manager!.bytes(for: request)
                return try await bytes.reduce(0) { $0 + $1.count }
            }
            do {
                _ = try await call.value
                XCTFail("round \(round): the call returned")
            } catch {
                XCTAssertEqual(error as? SessionError, .cancelled, "round \(round): \(error)")
            }
        }
        // Then a request that is sent: the server saw it, and only it.
        let (bytes, _) = try await manager.bytes(for: request)
        _ = try await bytes.reduce(0) { $0 + $1.count }
        XCTAssertEqual(server.requests.count, 1)
    }

    func testAStreamNobodyIteratesIsCancelledWhenDropped() async throws {
        server.route("/ignored", response: streamed(["x"], delay: .seconds(600)))
        weak var weakTask: DataTask?
        do {
            let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/ignored")))
            let task = try XCTUnwrap(bytes.task)
            weakTask = task
            XCTAssertEqual(task.state, .running)
        }
        XCTAssertTrue(server.waitForAllConnectionsClosed(), "a dropped stream must not hold its connection")
        try await eventually({ weakTask == nil }, "the finished task must be released")
    }

    func testASecondIterationThrows() async throws {
        server.route("/once", response: streamed(["once"]))
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/once")))
        var first = Data()
        for try await chunk in bytes { first.append(chunk) }
        XCTAssertEqual(first, Data("once".utf8))
        do {
            for try await _ in bytes {}
            XCTFail("a stream is iterated once")
        } catch let error as ResponseStreamError {
            XCTAssertEqual(error, .alreadyIterated)
        }
    }

    func testLinesSplitOnLFCRLFAndLoneCRAcrossChunks() async throws {
        let pieces = ["alpha\r", "\nbeta\rgamma\n", "\n", "caf\u{E9} \u{1F426}\r\n", "last"]
        server.route("/lines", response: streamed(pieces))
        let (lines, _) = try await manager.lines(for: URLRequest(url: try server.url("/lines")))
        var received: [String] = []
        for try await line in lines { received.append(line) }
        XCTAssertEqual(received, ["alpha", "beta", "gamma", "", "café 🐦", "last"])
    }

    /// A body cut mid-line: the lines before it, then the error, then nothing. The unfinished
    /// line was handed out by the next call, after the error, as if it were the body's last
    /// (an iterator driven by hand, or one whose caller caught the error and went on).
    func testAnUnfinishedLineIsNotHandedOutAfterTheError() async throws {
        server.route("/cut-lines", response: streamed(["one\ntw"], ending: .close))
        let (lines, _) = try await manager.lines(for: URLRequest(url: try server.url("/cut-lines")))
        var iterator = lines.makeAsyncIterator()
        let first = try await iterator.next()
        XCTAssertEqual(first, "one")
        do {
            let cut = try await iterator.next()
            XCTFail("a body cut mid-line must throw, got \(String(describing: cut))")
        } catch {
            XCTAssertTrue(error is SessionError, "\(error)")
        }
        let after = try await iterator.next()
        XCTAssertNil(after, "the cut line is not a line of the body")
    }

    /// A byte order mark before the first line is dropped, also split over two chunks and on
    /// a body with no line terminator; one later in the body is text and stays.
    func testLinesDropALeadingByteOrderMark() async throws {
        server.route("/bom", response: streamed(["\u{FEFF}{\"a\":1}\n\u{FEFF}x\n"]))
        server.route("/bom-only", response: streamed(["\u{FEFF}last"]))
        server.route("/bom-alone", response: streamed(["\u{FEFF}"]))
        var split = TestResponse(status: 200, headers: [("Content-Type", "text/plain")])
        split.body = .stream([
            TestResponse.Chunk(Data([0xEF, 0xBB]), delay: .zero), TestResponse.Chunk(Data([0xBF, 0x6F, 0x6B, 0x0A]), delay: .milliseconds(20)),
        ])
        split.framing = .chunked
        server.route("/bom-split", response: split)
        for (path, expected) in [("/bom", ["{\"a\":1}", "\u{FEFF}x"]), ("/bom-only", ["last"]), ("/bom-split", ["ok"]), ("/bom-alone", [])] {
            let (lines, _) = try await manager.lines(for: URLRequest(url: try server.url(path)))
            var received: [String] = []
            for try await line in lines { received.append(line) }
            XCTAssertEqual(received, expected, path)
        }
    }

    func testLinesReplaceInvalidUTF8() async throws {
        var response = TestResponse(status: 200, headers: [("Content-Type", "text/plain")])
        response.body = .data(Data([0x6F, 0x6B, 0xFF, 0x0A, 0xC3, 0x0A]))
        server.route("/bad", response: response)
        let (lines, _) = try await manager.lines(for: URLRequest(url: try server.url("/bad")))
        var received: [String] = []
        for try await line in lines { received.append(line) }
        XCTAssertEqual(received, ["ok\u{FFFD}", "\u{FFFD}"])
    }

    func testALineOverTheLimitEndsTheIterationAndTheTransfer() async throws {
        server.route("/long", response: streamed(Array(repeating: String(repeating: "x", count: 1000), count: 100), delay: .milliseconds(5)))
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/long")))
        let task = try XCTUnwrap(bytes.task)
        do {
            for try await _ in ResponseLines(bytes, maximumLineLength: 10_000) {}
            XCTFail("a line over the limit must throw")
        } catch let error as ResponseStreamError {
            XCTAssertEqual(error, .lineTooLong(limit: 10_000))
        }
        try await eventually({ task.state == .completed }, "the transfer must end")
        XCTAssertEqual(task.error as? SessionError, .cancelled)
    }

    /// The lines a chunk completed before a line over the limit are delivered first, then the
    /// error: one chunk here holds two short lines and the long one.
    func testTheLinesBeforeALineOverTheLimitInTheSameChunkAreDelivered() async throws {
        server.route("/mixed", response: streamed(["one\ntwo\n" + String(repeating: "x", count: 100) + "\n"]))
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/mixed")))
        var received: [String] = []
        do {
            for try await line in ResponseLines(bytes, maximumLineLength: 50) { received.append(line) }
            XCTFail("a line over the limit must throw")
        } catch let error as ResponseStreamError {
            XCTAssertEqual(error, .lineTooLong(limit: 50))
        }
        XCTAssertEqual(received, ["one", "two"], "the lines before the long one were lost with it")
    }

    func testHTTPSessionManagerStreamsRelativeToItsBaseURLAndChecksTheStatus() async throws {
        server.route("/api/feed", response: streamed(["one\n", "two\n"]))
        server.route("/api/gone", response: streamed(["gone"], status: 410))
        let http = HTTPSessionManager(baseURL: try server.url("/api/"))
        defer { http.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (lines, response) = try await http.lines("feed")
        XCTAssertEqual(response.url?.path, "/api/feed")
        var received: [String] = []
        for try await line in lines { received.append(line) }
        XCTAssertEqual(received, ["one", "two"])
        do {
            _ = try await http.bytes("gone")
            XCTFail("410 is not acceptable")
        } catch let error as SerializationError {
            guard case .unacceptableStatusCode(410, _, _) = error else { return XCTFail("unexpected \(error)") }
        }
    }
}
