import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Receive and send caps (`SessionConfiguration.maximumReceiveRate` / `maximumSendRate`,
/// `SessionTask`'s own, a throttled multipart body) paced by libcurl, against the in-process
/// server. Rates are checked with a generous tolerance: a capped transfer must not run faster
/// than 1.5 times its cap (an uncapped one on loopback runs hundreds of times faster), and
/// its bytes arrive intact. Downloads are 8 MB: libcurl 7.88 checks the receive rate between
/// passes of up to 100 reads (1.6 MB through the 16 KiB buffer of a capped transfer), so a
/// body that fits in one pass arrives at full speed.
final class RateLimitTests: XCTestCase {
    private var server: TestServer!
    private let size = 1_000_000
    private let cap: Double = 500_000
    private let downloadSize = 8_000_000
    private let downloadCap: Double = 2_500_000

    override func setUpWithError() throws {
        let body = Data(repeating: 0x5A, count: downloadSize)
        server = try TestServer()
        server.route("/big", response: TestResponse(headers: [("Content-Type", "application/octet-stream")], body: body))
        server.route("/upload", method: "POST") { request in .text("\(request.body.count)") }
    }

    override func tearDown() {
        server.shutdown()
    }

    private func manager(_ change: (inout SessionConfiguration) -> Void = { _ in }) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        change(&configuration)
        return URLSessionManager.raw(configuration)
    }

    /// Runs `task` (made by `make`, given the completion) and returns its response and the
    /// seconds from resume to completion.
    private func run(_ make: (@escaping @Sendable (DataResponse) -> Void) -> SessionTask) async -> (DataResponse, Double) {
        let start = ContinuousClock.now
        let response: DataResponse = await withCheckedContinuation { continuation in
            make { continuation.resume(returning: $0) }.resume()
        }
        let elapsed = ContinuousClock.now - start
        return (response, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    private func assertPaced(_ bytes: Int, seconds: Double, cap: Double, file: StaticString = #filePath, line: UInt = #line) {
        let rate = Double(bytes) / seconds
        XCTAssertLessThanOrEqual(rate, cap * 1.5, "\(Int(rate)) B/s against a cap of \(Int(cap)) B/s", file: file, line: line)
    }

    func testTheManagersReceiveCapPacesADownload() async throws {
        let manager = manager { $0.maximumReceiveRate = downloadCap }
        let request = URLRequest(url: try server.url("/big"))
        let (response, seconds) = await run { manager.dataTask(with: request, completionHandler: $0) }
        XCTAssertEqual(response.data?.count, downloadSize, "\(response.result)")
        assertPaced(downloadSize, seconds: seconds, cap: downloadCap)
    }

    func testATasksReceiveCapAppliesWithoutAManagerCap() async throws {
        let manager = manager()
        let request = URLRequest(url: try server.url("/big"))
        let (response, seconds) = await run { completion in
            let task = manager.dataTask(with: request, completionHandler: completion)
            task.maximumReceiveRate = downloadCap
            return task
        }
        XCTAssertEqual(response.data?.count, downloadSize, "\(response.result)")
        assertPaced(downloadSize, seconds: seconds, cap: downloadCap)
    }

    func testATaskNarrowsButNeverWidensTheManagersCap() async throws {
        // The manager's cap holds although the task asks for ten times as much.
        let manager = manager { $0.maximumReceiveRate = downloadCap }
        let request = URLRequest(url: try server.url("/big"))
        let (response, seconds) = await run { completion in
            let task = manager.dataTask(with: request, completionHandler: completion)
            task.maximumReceiveRate = downloadCap * 10
            return task
        }
        XCTAssertEqual(response.data?.count, downloadSize, "\(response.result)")
        assertPaced(downloadSize, seconds: seconds, cap: downloadCap)
    }

    func testTheManagersSendCapPacesAnUpload() async throws {
        let manager = manager { $0.maximumSendRate = cap }
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "POST"
        let body = Data(repeating: 0x61, count: size)
        let (response, seconds) = await run { manager.uploadTask(with: request, from: body, completionHandler: $0) }
        XCTAssertEqual(response.data.flatMap { String(decoding: $0, as: UTF8.self) }, "\(size)", "\(response.result)")
        assertPaced(size, seconds: seconds, cap: cap)
    }

    func testATasksSendCapPacesAnUpload() async throws {
        let manager = manager()
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "POST"
        let body = Data(repeating: 0x62, count: size)
        let (response, seconds) = await run { completion in
            let task = manager.uploadTask(with: request, from: body, completionHandler: completion)
            task.maximumSendRate = cap
            return task
        }
        XCTAssertEqual(response.data.flatMap { String(decoding: $0, as: UTF8.self) }, "\(size)", "\(response.result)")
        assertPaced(size, seconds: seconds, cap: cap)
    }

    /// `throttleBandwidth(withPacketSize:delay:)` is a send cap of packetSize / delay bytes per
    /// second: one 1 MB packet per 2 s is 500 kB/s, so the body is paced all along instead of
    /// leaving in one burst followed by a pause.
    func testAThrottledMultipartBodyIsSentUnderASendCap() async throws {
        let manager = manager()
        let payload = Data(repeating: 0x63, count: size)
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: try server.url("/upload").absoluteString, parameters: nil,
            constructingBodyWith: { [size] form in
                form.appendPart(withFileData: payload, name: "file", fileName: "a.bin", mimeType: "application/octet-stream")
                form.throttleBandwidth(withPacketSize: size, delay: 2)
            })
        let stream = try XCTUnwrap(request.httpBodyStream as? MultipartBodyStream)
        XCTAssertEqual(stream.sendRateCap, Double(size) / 2)
        let (response, seconds) = await run { manager.uploadTask(withStreamedRequest: request, completionHandler: $0) }
        let received = Int(response.data.flatMap { String(decoding: $0, as: UTF8.self) } ?? "") ?? -1
        XCTAssertEqual(Int64(received), stream.contentLength, "\(response.result)")
        assertPaced(received, seconds: seconds, cap: Double(size) / 2)
        // An old-style throttle would have slept 2 s after the single packet: the paced body
        // takes about as long, but never twice as long.
        XCTAssertLessThan(seconds, 30)
    }

    /// libcurl paces in bursts: a capped download takes ~1.4 MB at once, then waits until its
    /// count fits the cap (here ~2.8 s at 500 kB/s). That wait is the cap's, not the server's
    /// silence: with a 1 s idle timeout the download arrives whole (it failed with `.timedOut`
    /// after the first burst until 2026-11-27).
    func testACapsWaitLongerThanTheIdleTimeoutIsNotSilence() async throws {
        server.route("/mid", response: TestResponse(body: Data(repeating: 0x5B, count: 2_500_000)))
        let manager = manager { $0.maximumReceiveRate = 500_000 }
        var request = URLRequest(url: try server.url("/mid"))
        request.timeoutInterval = 1
        let (response, _) = await run { manager.dataTask(with: request, completionHandler: $0) }
        XCTAssertNil(response.error)
        XCTAssertEqual(response.data?.count, 2_500_000, "\(response.result)")
    }

    /// Rate cap × retry: the attempt the retrier sends again is timed as the first was. The
    /// first answer breaks off after 1.5 MB; the retry's whole 2.5 MB has libcurl's wait after
    /// its first burst (~2.8 s), forgiven under a 1 s timeout only if the new exchange's cap
    /// reaches the idle clock (without it: `.timedOut` on the retry).
    func testARetriedCappedDownloadIsTimedAsTheFirst() async throws {
        let body = Data((0..<2_500_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        server.routeAnsweringFirst(
            "/flaky", with: .fault(.truncatedBody(declaredLength: 2_500_000, sentLength: 1_500_000)),
            thenWith: TestResponse(body: body))
        let manager = manager { $0.maximumReceiveRate = 500_000 }
        manager.requestRetrier = FixedRetrier(decision: .retry)
        var request = URLRequest(url: try server.url("/flaky"))
        request.timeoutInterval = 1
        let (response, _) = await run { manager.dataTask(with: request, completionHandler: $0) }
        XCTAssertNil(response.error)
        XCTAssertEqual(response.data, body, "\(response.result)")
        XCTAssertEqual(server.requests.count, 2, "the broken answer was retried once")
    }

    /// The same for sending: a 64 KiB write at 30 kB/s is followed by a ~2.2 s wait.
    func testASendCapsWaitLongerThanTheIdleTimeoutIsNotSilence() async throws {
        let manager = manager { $0.maximumSendRate = 30_000 }
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "POST"
        request.timeoutInterval = 1
        let body = Data(repeating: 0x64, count: 100_000)
        let (response, _) = await run { manager.uploadTask(with: request, from: body, completionHandler: $0) }
        XCTAssertNil(response.error)
        XCTAssertEqual(response.data.flatMap { String(decoding: $0, as: UTF8.self) }, "100000", "\(response.result)")
    }

    /// A capped download whose server stops sending still times out: only the cap's own wait
    /// is forgiven, and 20 kB at 1 MB/s is a wait of 20 ms.
    func testACappedDownloadFromAServerThatStopsStillTimesOut() async throws {
        let stalled = try ScriptedServer(connections: 1) { socket, server in
            guard server.readHead(socket) != nil else { return }
            _ = server.write(socket, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + String(repeating: "x", count: 20_000))
            while server.readSome(socket) {}  // the rest never comes
        }
        defer { stalled.stop() }
        let manager = manager { $0.maximumReceiveRate = 1_000_000 }
        var request = URLRequest(url: try XCTUnwrap(URL(string: "http://127.0.0.1:\(stalled.port)/stalls")))
        request.timeoutInterval = 1
        let (response, _) = await run { manager.dataTask(with: request, completionHandler: $0) }
        guard case .timedOut? = response.error as? SessionError else {
            return XCTFail("expected a timeout, got \(response.result)")
        }
    }

    func testOnlyFinitePositiveRatesAreCaps() {
        XCTAssertNil(TransferRate.cap(0, -1, .infinity, .nan, nil))
        XCTAssertEqual(TransferRate.cap(0, 1000, 300.4, .infinity), 300)
        XCTAssertEqual(TransferRate.cap(0.2), 1, "a cap below one byte per second is one")
        XCTAssertNil(TransferRate.cap(1e300), "a cap beyond curl_off_t is no cap")
    }
}
