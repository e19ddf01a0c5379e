import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// HTTP/2 faults through the public API, against `FaultHTTP2Peer` (HTTP/2 over TLS on
/// loopback, behaviour by path): a reset stream, a refused stream, GOAWAY with streams in
/// flight, a connection dropped mid-body, a head over the limit in CONTINUATION frames, a
/// flow-control window that never opens, DATA trickled in small frames. Every task must end
/// exactly once (an over-fulfilled expectation fails), with a typed error or its body; a hang
/// would end in the request timeout and fail the test.
final class FaultHTTP2Tests: XCTestCase {
    private var peer: FaultHTTP2Peer!
    private var root: Certificate!

    override func setUpWithError() throws {
        let certificates = try TestCertificates.shared()
        root = try Certificate(contentsOf: certificates.root.certificatePEM)
        do {
            peer = try FaultHTTP2Peer(certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM)
        } catch let error as FaultHTTP2Peer.Unavailable {
            throw XCTSkip(error.description)
        }
    }

    override func tearDown() {
        peer?.stop()
        peer = nil
    }

    private func manager(_ change: (inout SessionConfiguration) -> Void = { _ in }) throws -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.httpVersion = .http2
        configuration.timeoutIntervalForRequest = 15
        change(&configuration)
        let manager = URLSessionManager.raw(configuration)
        var policy = SecurityPolicy.default
        policy.trustedRootCertificates = [root]
        try manager.setSecurityPolicy(policy)
        addTeardownBlock { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        return manager
    }

    /// Runs one task per path at once and returns their responses in the paths' order, each
    /// handler seen once (bounded wait).
    private func run(_ manager: URLSessionManager, _ paths: [String]) async throws -> [DataResponse] {
        let results = Mutex<[Int: [DataResponse]]>([:])
        let done = expectation(description: "every task completes")
        done.expectedFulfillmentCount = paths.count
        for (index, path) in paths.enumerated() {
            manager.dataTask(with: URLRequest(url: try peer.url(path))) { response in
                results.withLock { $0[index, default: []].append(response) }
                done.fulfill()
            }.resume()
        }
        await fulfillment(of: [done], timeout: 60)
        let collected = results.withLock { $0 }
        for (index, path) in paths.enumerated() {
            XCTAssertEqual(collected[index]?.count, 1, "\(path): completion handler calls")
        }
        return try paths.indices.map { try XCTUnwrap(collected[$0]?.first, "no response for \(paths[$0])") }
    }

    /// The connection a response came over (its local port).
    private func port(_ response: DataResponse) -> Int? {
        response.metrics?.finalTransaction?.localPort
    }

    private func assertHello(_ response: DataResponse, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNil(response.error, what, file: file, line: line)
        XCTAssertEqual(response.response?.statusCode, 200, what, file: file, line: line)
        XCTAssertEqual(response.data, Data("hello".utf8), what, file: file, line: line)
        XCTAssertEqual(response.metrics?.httpVersion, "HTTP/2", what, file: file, line: line)
    }

    /// The manager still works: a fresh request is answered.
    private func assertWorksAfterwards(_ manager: URLSessionManager, file: StaticString = #filePath, line: UInt = #line) async throws {
        let after = try await run(manager, ["/ok"])
        assertHello(after[0], "a request after the fault", file: file, line: line)
    }

    /// RST_STREAM(INTERNAL_ERROR) after the head and mid-body fails those streams only: four
    /// siblings in flight on the same connection arrive whole.
    func testAResetStreamFailsOnlyThatStreamAndItsSiblingsArrive() async throws {
        let manager = try manager()
        let first = try await run(manager, ["/ok"])[0]
        assertHello(first, "the first request")
        let paths = ["/slow", "/rst-headers", "/slow", "/rst-body", "/slow", "/slow"]
        let responses = try await run(manager, paths)
        for (path, response) in zip(paths, responses) {
            if path.hasPrefix("/rst") {
                guard case .badServerResponse(let message)? = response.error as? SessionError else {
                    XCTFail("\(path): expected badServerResponse, got \(String(describing: response.error))")
                    continue
                }
                XCTAssertTrue(message.contains("INTERNAL_ERROR"), message)
                XCTAssertNil(response.data.flatMap { $0.count == 100_000 ? $0 : nil }, "\(path): no short body passed for whole")
            } else {
                assertHello(response, "\(path), a sibling of the reset streams")
                XCTAssertEqual(port(response), port(first), "\(path) shared the first request's connection")
            }
        }
        try await assertWorksAfterwards(manager)
    }

    /// REFUSED_STREAM means the server did nothing with the request: libcurl sends it again on a
    /// new connection by itself, so a stream refused once arrives; one refused every time ends
    /// as a lost connection after libcurl's bounded resends, not a hang.
    func testARefusedStreamIsSentAgainAndOneAlwaysRefusedIsANetworkLoss() async throws {
        let manager = try manager()
        let responses = try await run(manager, ["/refuse-once/\(UUID().uuidString)", "/refuse-always"])
        assertHello(responses[0], "a stream refused once")
        guard case .networkLost(let message)? = responses[1].error as? SessionError else {
            return XCTFail("always refused: expected networkLost, got \(String(describing: responses[1].error))")
        }
        XCTAssertFalse(message.isEmpty)
        try await assertWorksAfterwards(manager)
    }

    /// GOAWAY naming the second of four streams in flight: the two it covers are answered on
    /// the old connection, the two above it (never processed) are sent again on a new one and
    /// arrive. No retry policy: the resend is libcurl's.
    func testGoAwayWithStreamsInFlightAnswersTheCoveredOnesAndResendsTheRest() async throws {
        let manager = try manager()
        let first = try await run(manager, ["/ok"])[0]
        assertHello(first, "the first request")
        let path = "/goaway/\(UUID().uuidString)/4"
        let responses = try await run(manager, Array(repeating: path, count: 4))
        for response in responses {
            assertHello(response, "a stream in flight at the GOAWAY")
        }
        let ports = responses.compactMap(port)
        XCTAssertEqual(ports.count, 4)
        XCTAssertEqual(ports.filter { $0 == port(first) }.count, 2, "two answered on the old connection, two elsewhere: \(ports)")
        try await assertWorksAfterwards(manager)
    }

    /// A reused connection closed without GOAWAY once the next request's HEADERS were on it,
    /// before any byte of an answer (a server that died, or dropped the connection as idle):
    /// a GET goes once more, on a new connection, as libcurl resends one lost that way over
    /// HTTP/1.1; a POST does not. libcurl 7.88 resends neither here: the task failed with "HTTP/2 stream 3
    /// was not closed cleanly before end of the underlying stream".
    func testARequestLostWithAReusedConnectionClosedWithoutGoAwayIsSentAgain() async throws {
        let manager = try manager()
        let first = try await run(manager, ["/ok"])[0]
        assertHello(first, "the first request")
        let response = try await run(manager, ["/drop-once/\(UUID().uuidString)"])[0]
        assertHello(response, "the request lost with its connection")
        XCTAssertNotEqual(port(response), port(first), "answered on the dropped connection")
        XCTAssertEqual(response.metrics?.transactionMetrics.count, 2, "the lost exchange and the resent one")
        try await assertWorksAfterwards(manager)
        // A POST is not sent again on its own: the end may have followed a GOAWAY that covered
        // its stream (RFC 9113 §6.8: "might have been processed"), which the engine cannot see.
        var post = URLRequest(url: try peer.url("/drop-once/\(UUID().uuidString)"))
        post.httpMethod = "POST"
        post.httpBody = Data("once".utf8)
        let posted = await manager.response(for: post)
        guard case .networkLost? = posted.error as? SessionError else {
            return XCTFail("a POST lost with its connection: expected networkLost, got \(String(describing: posted.error))")
        }
        XCTAssertEqual(posted.metrics?.transactionMetrics.count, 1, "the POST was sent again")
        // On a connection of its own (not reused) the loss is the server's answer: not resent.
        let fresh = try await run(try self.manager(), ["/drop-once/\(UUID().uuidString)"])[0]
        guard case .networkLost? = fresh.error as? SessionError else {
            return XCTFail("a new connection dropped: expected networkLost, got \(String(describing: fresh.error))")
        }
    }

    /// The TCP connection dropped after 1,000 of 100,000 body bytes: a lost connection, never a
    /// short body passed for whole.
    func testAConnectionDroppedMidBodyIsANetworkLoss() async throws {
        let manager = try manager()
        let response = try await run(manager, ["/close"])[0]
        guard case .networkLost? = response.error as? SessionError else {
            return XCTFail("expected networkLost, got \(String(describing: response.error)) with \(response.data?.count ?? 0) bytes")
        }
        try await assertWorksAfterwards(manager)
    }

    /// A 40 KB head, in HEADERS and CONTINUATION frames, over a 16 KiB limit.
    func testAHeadOverTheLimitInContinuationFramesIsRefused() async throws {
        let manager = try manager { $0.maximumResponseHeaderBytes = 16 * 1024 }
        let response = try await run(manager, ["/bigheaders"])[0]
        XCTAssertEqual(response.error as? SessionError, .responseHeadersTooLarge(limit: 16 * 1024))
        XCTAssertNil(response.response, "no response handed out")
        try await assertWorksAfterwards(manager)
    }

    /// A peer that never sends WINDOW_UPDATE stalls a 300 KB upload after the first 64 KiB:
    /// the request timeout ends it.
    func testAnUploadIntoAWindowThatNeverOpensTimesOut() async throws {
        let manager = try manager { $0.timeoutIntervalForRequest = 3 }
        var request = URLRequest(url: try peer.url("/window"))
        request.httpMethod = "POST"
        let result = Mutex<[DataResponse]>([])
        let done = expectation(description: "the upload ends")
        manager.uploadTask(with: request, from: Data(repeating: 0x61, count: 300_000)) { response in
            result.withLock { $0.append(response) }
            done.fulfill()
        }.resume()
        await fulfillment(of: [done], timeout: 60)
        let response = try XCTUnwrap(result.withLock { $0.first })
        guard case .timedOut? = response.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: response.error))")
        }
        try await assertWorksAfterwards(manager)
    }

    /// Twenty DATA frames of 50 bytes, 30 ms apart, beside a quick sibling: the body arrives
    /// whole and in order.
    func testABodyTrickledInSmallFramesArrivesWhole() async throws {
        let manager = try manager()
        let responses = try await run(manager, ["/slowframes", "/ok"])
        XCTAssertNil(responses[0].error)
        XCTAssertEqual(responses[0].data, Data(String(repeating: "0123456789", count: 100).utf8))
        assertHello(responses[1], "a sibling of the trickled body")
    }

    /// An answer with END_STREAM while the request body's producer has nothing ready (the
    /// upload paused, the rest of the body never sent): a 413, and a 200 (the server needs no
    /// more of the body). The task ends with the answer, not the silence probe or the timeout.
    /// libcurl stops the sending only for an error status: for the 200 the task waited for its
    /// producer (here one that waits for the answer) until the idle timeout.
    func testAnEarlyAnswerWhileTheBodySequenceWaitsEndsTheUpload() async throws {
        for (path, status) in [("/early413", 413), ("/early200", 200)] {
            // A manager (and connection) each: the peer drops a connection on which body
            // bytes arrive for a stream it answered, which the 413's may.
            let manager = try manager()
            let (stream, producer) = AsyncStream<Data>.makeStream()
            producer.yield(Data(repeating: 0x61, count: 1000))
            var request = URLRequest(url: try peer.url(path))
            request.httpMethod = "PUT"
            let (data, response) = try await manager.upload(for: request, from: stream, length: 1 << 20)
            producer.finish()
            XCTAssertEqual(response.statusCode, status, path)
            XCTAssertEqual(data, Data("early".utf8), path)
            XCTAssertEqual(manager.engine.silenceProbes.load(ordering: .relaxed), 0, "\(path): an answered upload waited for the silence probe")
        }
    }

    /// An early complete answer followed by RST_STREAM(NO_ERROR) while a `Data` or file body
    /// is still being sent (RFC 9113 §8.1: the client must not discard the answer). libcurl
    /// 7.88 failed the next send ("stream was not closed cleanly"), and the answer was lost.
    func testAnEarlyAnswerEndedByAResetWhileAWholeBodyIsSentIsKept() async throws {
        let body = Data(repeating: 0x62, count: 8 << 20)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-early-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("body.bin")
        try body.write(to: file)
        for fromFile in [false, true] {
            let manager = try manager()
            var request = URLRequest(url: try peer.url("/early200rst"))
            request.httpMethod = "PUT"
            let response: DataResponse = await withCheckedContinuation { continuation in
                let task = fromFile
                    ? manager.uploadTask(with: request, fromFile: file) { continuation.resume(returning: $0) }
                    : manager.uploadTask(with: request, from: body) { continuation.resume(returning: $0) }
                task.resume()
            }
            XCTAssertNil(response.error, "from a file: \(fromFile): \(response.result)")
            XCTAssertEqual(response.response?.statusCode, 200, "from a file: \(fromFile)")
            XCTAssertEqual(response.data, Data("early".utf8), "from a file: \(fromFile)")
        }
    }

    /// The same 200 while the response hook is still deciding: libcurl counted the body it
    /// holds paused for the hook, and ending the upload then would have freed it (the task
    /// completing with 200 and no body). The hook's answer hands it over first.
    func testAnEarlySuccessHeldForTheResponseHookKeepsItsBody() async throws {
        let manager = try manager()
        manager.setDataTaskDidReceiveResponseBlock { _, _ in
            usleep(300_000)  // the hook takes its time; the answer's body waits in libcurl
            return .allow
        }
        let (stream, producer) = AsyncStream<Data>.makeStream()
        producer.yield(Data(repeating: 0x61, count: 1000))
        var request = URLRequest(url: try peer.url("/early200"))
        request.httpMethod = "PUT"
        let (data, response) = try await manager.upload(for: request, from: stream, length: 1 << 20)
        producer.finish()
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(data, Data("early".utf8))
    }
}
