import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A server that answers an upload before reading it. A server that then reads (drains) the
/// rest before closing gives the client its answer every time; one that closes at once, with
/// the upload unread, resets the connection, and the client either reads the answer first or
/// loses the connection while still sending: the task completes once, with the server's answer
/// or `networkLost`, never hangs and never reports a body the server did not get.
final class FaultUploadEarlyAnswerTests: XCTestCase {
    /// 8 MiB: more than loopback's socket buffers hold, so the client is still sending when the
    /// answer comes.
    private let body = Data(repeating: UInt8(ascii: "u"), count: 8 << 20)
    private let rounds = 8

    private func upload(to url: URL, manager: URLSessionManager) async -> (DataResponse, calls: Int) {
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        let calls = Mutex(0)
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, from: body) { response in
                // A second call would resume the continuation twice and trap.
                if calls.withLock({ count -> Int in
                    count += 1
                    return count
                }) == 1 { continuation.resume(returning: response) }
            }.resume()
        }
        // A late second call lands on the completion queue after the first.
        await withCheckedContinuation { continuation in manager.completionQueue.async { continuation.resume() } }
        return (response, calls.withLock { $0 })
    }

    private func manager() -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.timeoutIntervalForRequest = 30  // the bound on a hang
        return URLSessionManager.raw(configuration)
    }

    /// `status` sent right after the request head; then `drain` reads the rest of the upload
    /// before closing, or the socket is closed at once with the upload unread.
    private func earlyAnswerer(status: String, drain: Bool) throws -> ScriptedServer {
        try ScriptedServer { socket, server in
            guard server.readHead(socket) != nil else { return }
            server.write(socket, "HTTP/1.1 \(status)\r\nContent-Length: 5\r\nConnection: close\r\n\r\nearly")
            if drain {
                shutdown(socket, Int32(SHUT_WR))  // FIN after the answer; read what is still coming
                var sink = [UInt8](repeating: 0, count: 65536)
                for _ in 0..<100_000 where recv(socket, &sink, sink.count, 0) > 0 {}
            }
        }
    }

    /// Reads the upload's first chunk (1,000 "a"s, some perhaps already in `head`'s read);
    /// false when the connection ended first.
    static func readFirstChunk(_ socket: Int32, after head: String) -> Bool {
        var seen = head.utf8.count { $0 == 0x61 }
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<1000 where seen < 1000 {
            let count = recv(socket, &buffer, buffer.count, 0)
            guard count > 0 else { return false }
            seen += buffer[0..<count].count { $0 == 0x61 }
        }
        return true
    }

    /// A PUT to `baseURL` whose body sequence has given one chunk (1,000 "a"s) and then waits
    /// for `producer`.
    private static func waitingUpload(
        to baseURL: String
    ) throws -> (URLRequest, AsyncStream<Data>, AsyncStream<Data>.Continuation) {
        let (stream, producer) = AsyncStream<Data>.makeStream()
        producer.yield(Data(repeating: 0x61, count: 1000))
        var request = URLRequest(url: try XCTUnwrap(URL(string: "\(baseURL)/upload")))
        request.httpMethod = "PUT"
        return (request, stream, producer)
    }

    /// Sends FIN after the answer, then reads what the client still sends until it closes.
    static func finishAndDrain(_ socket: Int32) {
        shutdown(socket, Int32(SHUT_WR))
        var sink = [UInt8](repeating: 0, count: 65536)
        for _ in 0..<100_000 where recv(socket, &sink, sink.count, 0) > 0 {}
    }

    /// The outcomes seen, by kind: "413", "networkLost", or anything else (a failure).
    private func outcomes(of status: String, drain: Bool) async throws -> [String: Int] {
        let server = try earlyAnswerer(status: status, drain: drain)
        defer { server.stop() }
        let manager = manager()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        var seen: [String: Int] = [:]
        for _ in 0..<rounds {
            let (response, calls) = await upload(to: try XCTUnwrap(URL(string: "\(server.baseURLString)/upload")), manager: manager)
            XCTAssertEqual(calls, 1, "the completion handler ran \(calls) times")
            let kind: String
            if let error = response.error {
                kind = (error as? SessionError).map { caseName(of: $0) } ?? "\(error)"
            } else {
                kind = response.response.map { "\($0.statusCode)" } ?? "no response"
                XCTAssertEqual(response.data, Data("early".utf8), "the early answer's body")
            }
            seen[kind, default: 0] += 1
        }
        try await eventually({ manager.tasks.isEmpty }, "a task stayed in the manager")
        return seen
    }

    func testA413BeforeTheUploadIsReadIsDeliveredWhenTheServerDrains() async throws {
        let seen = try await outcomes(of: "413 Content Too Large", drain: true)
        XCTAssertEqual(seen, ["413": rounds], "\(seen)")
    }

    func testA413AndAnImmediateCloseIsThe413OrANetworkLoss() async throws {
        let seen = try await outcomes(of: "413 Content Too Large", drain: false)
        XCTAssertEqual(seen.keys.filter { !["413", "networkLost"].contains($0) }, [], "\(seen)")
        print("early 413 and close: \(seen)")
    }

    func testA200AndAnImmediateCloseIsThe200OrANetworkLoss() async throws {
        let seen = try await outcomes(of: "200 OK", drain: false)
        XCTAssertEqual(seen.keys.filter { !["200", "networkLost"].contains($0) }, [], "\(seen)")
        print("early 200 and close: \(seen)")
    }

    /// An answer that comes while the caller's body sequence has nothing to give (the upload is
    /// paused waiting for it) still ends the task: the 413 and its body are delivered at once,
    /// not when the producer's next chunk or the request timeout comes, and the producer is
    /// not asked for more. Both framings (a declared length, chunked), and the answer's body
    /// in the head's write or a moment after it: with `Connection: close`, libcurl stops the
    /// sending only when that body is complete.
    func testAnEarlyAnswerWhileTheBodySequenceWaitsEndsTheUpload() async throws {
        let manager = manager()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        for bodyApart in [false, true] {
            let server = try ScriptedServer { socket, server in
                guard let head = server.readHead(socket) else { return }
                // The body's one chunk (1,000 "a"s) first, so that the client has sent all it
                // had, and a moment for its next read to find the producer empty and pause;
                // then the answer. (Without the moment the answer may come before that read.)
                guard Self.readFirstChunk(socket, after: head) else { return }
                usleep(100_000)
                let head413 = "HTTP/1.1 413 Content Too Large\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
                if bodyApart {
                    server.write(socket, head413)
                    usleep(100_000)
                    server.write(socket, "early")
                } else {
                    server.write(socket, head413 + "early")
                }
                Self.finishAndDrain(socket)
            }
            defer { server.stop() }
            for length in [Int64(1 << 20), nil] {
                // One chunk, then the sequence waits for a producer that only goes on once the
                // answer is in: a paused upload (CURL_READFUNC_PAUSE) meets the server's answer.
                let (request, stream, producer) = try Self.waitingUpload(to: server.baseURLString)
                let label = "length \(String(describing: length)), body apart: \(bodyApart)"
                do {
                    let (data, response) = try await manager.upload(for: request, from: stream, length: length)
                    XCTAssertEqual(response.statusCode, 413, label)
                    XCTAssertEqual(data, Data("early".utf8), label)
                } catch {
                    XCTFail("\(label): \(error)")
                }
                producer.finish()
                // Without the send pause lifted the task ended only when the silence probe (a
                // second of quiet, libcurl 7.88) or, where no probes run, the timeout lifted it.
                XCTAssertEqual(manager.engine.silenceProbes.load(ordering: .relaxed), 0, "\(label): the answered upload waited for the silence probe")
            }
        }
        try await eventually({ manager.tasks.isEmpty }, "a task stayed in the manager")
    }

    /// An answer to an upload whose body sequence waits, after which the server closes the
    /// connection, where the read that ends the answer brings no body byte: a close-delimited
    /// body ended by the server's FIN, an empty one, an HTTP/1.0 one, a chunked one whose last
    /// chunk comes apart, a gzip body whose trailer comes apart, and a body cut short of its
    /// length. The task ends when the answer ends (with its body, or failing for the short
    /// one), not when the silence probe or the request timeout comes; the producer is not
    /// waited for.
    func testAnAnswerWhoseEndBringsNoBodyByteEndsTheWaitingUpload() async throws {
        let manager = manager()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        // gzip of "early" (mtime 0); the last 8 bytes are its trailer (CRC and length).
        let gzipped: [UInt8] = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x4b, 0x4d, 0x2c, 0xca, 0xa9, 0x04, 0x00,
            0x4b, 0xce, 0x8e, 0xa3, 0x05, 0x00, 0x00, 0x00,
        ]
        let gzipHead = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: \(gzipped.count)\r\nConnection: close\r\n\r\n"
        // The writes, each a moment apart; the body expected (nil: the task fails).
        let answers: [(label: String, writes: [[UInt8]], body: String?)] = [
            ("empty, closed", [Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8)], ""),
            ("close-delimited", [Array("HTTP/1.1 200 OK\r\n\r\nearly".utf8)], "early"),
            ("HTTP/1.0", [Array("HTTP/1.0 200 OK\r\n\r\nearly".utf8)], "early"),
            ("chunked, closed", [
                Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nearly\r\n".utf8),
                Array("0\r\n\r\n".utf8),
            ], "early"),
            ("gzip, trailer apart", [Array(gzipHead.utf8) + gzipped.dropLast(8), Array(gzipped.suffix(8))], "early"),
            ("cut short", [Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nearly".utf8)], nil),
        ]
        for answer in answers {
            let server = try ScriptedServer { socket, server in
                guard let head = server.readHead(socket) else { return }
                // The body's one chunk first, and a moment for the client's next read to find
                // the producer empty and pause; then the answer, each write and the FIN a
                // moment apart (each its own read on the client).
                guard Self.readFirstChunk(socket, after: head) else { return }
                for write in answer.writes {
                    usleep(100_000)
                    guard sendAll(socket, write) else { return }
                }
                usleep(100_000)
                Self.finishAndDrain(socket)
            }
            defer { server.stop() }
            for length in [Int64(1 << 20), nil] {
                let (request, stream, producer) = try Self.waitingUpload(to: server.baseURLString)
                let label = "\(answer.label), length \(String(describing: length))"
                let probesBefore = manager.engine.silenceProbes.load(ordering: .relaxed)
                do {
                    let (data, response) = try await manager.upload(for: request, from: stream, length: length)
                    XCTAssertNotNil(answer.body, "\(label): a body cut short arrived as whole")
                    XCTAssertEqual(response.statusCode, 200, label)
                    XCTAssertEqual(String(decoding: data, as: UTF8.self), answer.body, label)
                } catch {
                    if answer.body != nil { XCTFail("\(label): \(error)") }
                }
                producer.finish()
                // libcurl stops the sending when such an answer ends, but keeps the send pause
                // of the read callback that found the producer empty, and reads the socket no
                // more: without a lift the task waited for the silence probe (a second, libcurl
                // 7.88) or, where no probes run, the request timeout.
                XCTAssertEqual(manager.engine.silenceProbes.load(ordering: .relaxed), probesBefore, "\(label): the answered upload waited for the silence probe")
            }
        }
        try await eventually({ manager.tasks.isEmpty }, "a task stayed in the manager")
    }

    /// The lift above is not made in the pass right after any lift: each lift makes libcurl
    /// run its transfer again at once, whose read callback pauses again. Two uploads whose
    /// servers answered (a head after which the connection closes, its body not ended yet)
    /// wait for their producers, one starting a little after the other: the driver sleeps
    /// meanwhile instead of lifting one pause after the other, each lift's pass the other's
    /// reason to lift. And a whole chunked answer on a kept-alive connection needs no lift at
    /// all: libcurl goes on sending when the producer has more.
    func testUploadsWaitingForTheirProducersAfterAnAnswerLetTheDriverSleep() async throws {
        let manager = manager()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        // The answer's writes after the body's first 1,000 bytes; then the rest of the upload
        // is read to its last chunk ("b", then the end), and the server closes.
        func server(answer: [String]) throws -> ScriptedServer {
            try ScriptedServer { socket, server in
                guard let head = server.readHead(socket) else { return }
                var received = Data(head.utf8)
                var buffer = [UInt8](repeating: 0, count: 4096)
                func readUntil(_ marker: String) -> Bool {
                    for _ in 0..<10_000 where received.range(of: Data(marker.utf8)) == nil {
                        let count = recv(socket, &buffer, buffer.count, 0)
                        guard count > 0 else { return false }
                        received.append(contentsOf: buffer[0..<count])
                    }
                    return received.range(of: Data(marker.utf8)) != nil
                }
                guard readUntil(String(repeating: "a", count: 1000)) else { return }
                for write in answer {
                    usleep(100_000)
                    server.write(socket, write)
                }
                _ = readUntil("b\r\n0\r\n\r\n")
            }
        }
        let closing = [
            try server(answer: ["HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nearly"]),
            try server(answer: ["HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nearly"]),
        ]
        defer { for server in closing { server.stop() } }
        let keptAlive = try server(answer: ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nearly\r\n", "0\r\n\r\n"])
        defer { keptAlive.stop() }
        @Sendable func upload(to baseURL: String, startingAfter delay: UInt64) async throws -> (Data, Int) {
            try await Task.sleep(nanoseconds: delay)
            let (request, stream, producer) = try Self.waitingUpload(to: baseURL)
            // The producer's last chunk comes well after the answer (not an assertion: the
            // test only needs the tasks to wait a while with their answers in).
            let finisher = Task {
                try await Task.sleep(nanoseconds: 700_000_000)
                producer.yield(Data("b".utf8))
                producer.finish()
            }
            defer { finisher.cancel() }
            let (data, response) = try await manager.upload(for: request, from: stream, length: nil)
            return (data, response.statusCode)
        }
        async let first = upload(to: closing[0].baseURLString, startingAfter: 0)
        async let second = upload(to: closing[1].baseURLString, startingAfter: 30_000_000)
        async let third = upload(to: keptAlive.baseURLString, startingAfter: 60_000_000)
        let results = try await [first, second, third]
        for (data, status) in results {
            XCTAssertEqual(status, 200)
            XCTAssertEqual(data, Data("early".utf8))
        }
        // A few: the heads' passes, the bodies' passes, passes that followed a socket event.
        // Lifting in the pass right after a lift spun the driver for the whole wait (tens of
        // thousands).
        let lifts = manager.engine.sendPauseLifts.load(ordering: .relaxed)
        print("send pause lifts while the producers waited: \(lifts)")
        XCTAssertLessThan(lifts, 100, "the driver lifted send pauses \(lifts) times while the producers waited")
        try await eventually({ manager.tasks.isEmpty }, "a task stayed in the manager")
    }

    /// A 307 answered before the upload is read, then a reset: the redirect is followed with
    /// the whole body, or the task fails; it never arrives with part of the body.
    func testA307BeforeTheUploadIsReadNeverArrivesWithAShortBody() async throws {
        let target = try TestServer()
        defer { target.shutdown() }
        target.route("/target") { request in .text("got \(request.body.count)") }
        let redirector = try ScriptedServer { socket, server in
            guard server.readHead(socket) != nil else { return }
            server.write(socket, "HTTP/1.1 307 Temporary Redirect\r\nLocation: \(target.baseURLString)/target\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            server.resetOnClose(socket)
        }
        defer { redirector.stop() }
        let manager = manager()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        var seen: [String: Int] = [:]
        for _ in 0..<rounds {
            let (response, calls) = await upload(to: try XCTUnwrap(URL(string: "\(redirector.baseURLString)/moved")), manager: manager)
            XCTAssertEqual(calls, 1)
            if let error = response.error as? SessionError {
                seen[caseName(of: error), default: 0] += 1
                XCTAssertEqual(caseName(of: error), "networkLost", "\(error)")
            } else {
                seen["followed", default: 0] += 1
                XCTAssertEqual(response.data.map { String(decoding: $0, as: UTF8.self) }, "got \(body.count)")
            }
        }
        XCTAssertTrue(target.requests.allSatisfy { $0.body.count == body.count }, "a short body reached the target")
        print("early 307 and reset: \(seen)")
    }

    /// A server that closes a kept-alive connection just as the client sends the next upload on
    /// it (its idle timeout, or gunicorn 27 giving up on a body it did not read when it is over
    /// its 64 KiB drain limit). Here the first connection serves one request, then reads the
    /// head of the second and resets. No byte of an answer came, so the request goes again on a
    /// new connection, the body rewound through Curlew's seek callback: the caller sees one
    /// answer with the whole body. Who resends depends on when the reset lands: while libcurl
    /// waits for the answer, libcurl itself (one exchange in the metrics); while it is still
    /// sending the body (seen under ThreadSanitizer's slowdown), libcurl reports the send
    /// failure and the engine resends a request that died on a reused connection before any
    /// byte of an answer (two exchanges: the reused one, then the new one). Both are right.
    func testAnUploadOnAKeptAliveConnectionTheServerDroppedIsSentAgain() async throws {
        let server = try ScriptedServer { socket, server in
            let connection = server.acceptedCount
            var served = 0
            while let head = server.readHead(socket) {
                if connection == 1 && served == 1 {
                    server.resetOnClose(socket)
                    return
                }
                guard let length = server.readBody(socket, after: head) else { return }
                served += 1
                server.write(socket, "HTTP/1.1 200 OK\r\nContent-Length: \(length.description.count)\r\nConnection: keep-alive\r\n\r\n\(length)")
            }
        }
        defer { server.stop() }
        let manager = manager()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let url = try XCTUnwrap(URL(string: "\(server.baseURLString)/put"))
        let (first, _) = await upload(to: url, manager: manager)
        XCTAssertEqual(first.data.map { String(decoding: $0, as: UTF8.self) }, "\(body.count)")
        let (second, calls) = await upload(to: url, manager: manager)
        XCTAssertEqual(calls, 1)
        XCTAssertNil(second.error, "the reused connection's loss reached the caller")
        XCTAssertEqual(second.data.map { String(decoding: $0, as: UTF8.self) }, "\(body.count)", "the whole body, on the new connection")
        XCTAssertEqual(server.acceptedCount, 2)
        let reused = second.metrics?.transactionMetrics.map(\.isReusedConnection) ?? []
        XCTAssertTrue(reused == [false] || reused == [true, false], "exchanges (reused?): \(reused)")
    }
}

/// `bytes(for:uploading:)` answered early with an empty body while the upload goes on: a
/// caller that drops the stream ends the transfer and stops its producer. The empty answer
/// did not count as the end of the transfer when its own body was still being sent.
final class FaultUploadEarlyEmptyAnswerTests: XCTestCase {
    func testDroppingTheStreamOfAnEmptyEarlyAnswerEndsAnUploadStillGoing() async throws {
        let server = try ScriptedServer { socket, server in
            guard server.readHead(socket) != nil else { return }
            _ = server.write(socket, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            var sink = [UInt8](repeating: 0, count: 65536)
            for _ in 0..<100_000 where recv(socket, &sink, sink.count, 0) > 0 {}  // reads on until the client leaves
        }
        defer { server.stop() }
        let manager = URLSessionManager.raw()
        let stopped = Mutex(false)
        let (body, continuation) = AsyncStream<Data>.makeStream()
        continuation.onTermination = { _ in stopped.withLock { $0 = true } }
        continuation.yield(Data(repeating: 0x61, count: 1000))  // then nothing, and no end: a live feed
        var request = URLRequest(url: try XCTUnwrap(URL(string: "\(server.baseURLString)/live")))
        request.httpMethod = "POST"
        var task: DataTask?
        do {
            let (bytes, head) = try await manager.bytes(for: request, uploading: body)
            XCTAssertEqual(head.statusCode, 200)
            task = bytes.task
        }  // the caller is done with the answer
        try await eventually({ task?.state == .completed }, "the upload went on after its stream was dropped")
        try await eventually({ stopped.withLock { $0 } }, "the body's producer still runs")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
