import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The idle and resource timeouts: their edge values, and the idle clock's meaning (time
/// since a byte last moved in either direction).
final class TimeoutTests: XCTestCase {
    func testEdgeValuesMeanNoLimitAndNeverTrap() {
        for seconds in [TimeInterval.infinity, -.infinity, .nan, 0, -1, 1e300, .greatestFiniteMagnitude, 4e9] {
            XCTAssertNil(TransferTimeouts.nanoseconds(seconds), "\(seconds)")
        }
        XCTAssertEqual(TransferTimeouts.nanoseconds(2), 2_000_000_000)
        XCTAssertEqual(TransferTimeouts.nanoseconds(0.25), 250_000_000)
        XCTAssertEqual(TransferTimeouts.nanoseconds(.leastNonzeroMagnitude), 1)
        XCTAssertEqual(TransferTimeouts.nanoseconds(7 * 24 * 3600), 604_800_000_000_000)
    }

    func testARequestsOwnTimeoutWinsUnlessItIsTheDefault() throws {
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForRequest = 5
        var request = URLRequest(url: try XCTUnwrap(URL(string: "http://h/")))
        XCTAssertEqual(TransferTimeouts(request: request, configuration: configuration).idle, 5_000_000_000)
        request.timeoutInterval = 2
        XCTAssertEqual(TransferTimeouts(request: request, configuration: configuration).idle, 2_000_000_000)
        request.timeoutInterval = .infinity
        XCTAssertNil(TransferTimeouts(request: request, configuration: configuration).idle)
        // 0, negative and NaN are no value of the request's: the configuration's holds (NaN
        // turned the idle timeout off).
        for value in [0, -1, -.infinity, .nan] as [TimeInterval] {
            let idle = TransferTimeouts(requested: value, timeoutIntervalForRequest: 5, timeoutIntervalForResource: 0).idle
            XCTAssertEqual(idle, 5_000_000_000, "\(value)")
        }
    }

    /// A task whose first request was adapted (a token refresh) began then: its resource
    /// timeout counts from there, not from the transfer's start, and the idle clock from now.
    func testTheTotalClockCountsFromTheAdaptation() {
        let clock = TransferClock(timeouts: TransferTimeouts(idle: 1_000, total: 100), now: 50, totalStart: 10)
        XCTAssertEqual(clock.nextDeadline, 110)
        XCTAssertNil(clock.expiry(at: 109))
        XCTAssertNotNil(clock.expiry(at: 110))
        XCTAssertEqual(TransferClock(timeouts: TransferTimeouts(idle: 1_000, total: 100), now: 50, totalStart: 80).nextDeadline, 150,
                       "never later than the transfer's own start")
    }

    func testTheIdleClockCountsFromTheLastActivityAndStopsWhilePaused() {
        var clock = TransferClock(timeouts: TransferTimeouts(idle: 100, total: 1_000), now: 0)
        XCTAssertEqual(clock.nextDeadline, 100)
        XCTAssertNil(clock.expiry(at: 99))
        clock.noteActivity(at: 50)
        XCTAssertNil(clock.expiry(at: 149))
        XCTAssertNotNil(clock.expiry(at: 150))
        clock.setHolds(.suspended, at: 150)
        XCTAssertEqual(clock.nextDeadline, 1_000, "only the total clock runs while stopped")
        XCTAssertNil(clock.expiry(at: 900))
        clock.setHolds([], at: 900)
        XCTAssertEqual(clock.nextDeadline, 1_000)
        XCTAssertEqual(clock.expiry(at: 1_000).map { caseName(of: $0) }, "total", "the total clock never stops")
        let unlimited = TransferClock(timeouts: TransferTimeouts(idle: nil, total: nil), now: 0)
        XCTAssertNil(unlimited.nextDeadline)
        XCTAssertNil(unlimited.expiry(at: .max))
    }

    /// A silent transfer is probed `firstProbeDelay` after its last byte, then after twice
    /// the previous wait each time nothing came (at most `longestProbeFactor` times the first);
    /// a byte or the end of a hold starts the series again; a hold or no delay means no probe.
    func testProbesComeAfterSilenceBackOffAndStartAgainWithActivity() {
        var clock = TransferClock(timeouts: TransferTimeouts(idle: 100_000, total: nil), now: 0, firstProbeDelay: 10)
        XCTAssertEqual(clock.nextProbe, 10)
        XCTAssertEqual(clock.nextWake, 10, "the probe comes before the idle deadline")
        clock.probed(at: 10)
        XCTAssertEqual(clock.nextProbe, 30)
        clock.probed(at: 30)
        XCTAssertEqual(clock.nextProbe, 70)
        clock.noteActivity(at: 75)
        XCTAssertEqual(clock.nextProbe, 85, "a byte moved: the first wait again")
        var now: UInt64 = 85
        for _ in 0..<300 {
            clock.probed(at: now)
            now = clock.nextProbe ?? .max
        }
        XCTAssertEqual(clock.nextProbe.map { $0 - clock.probeAnchor }, 10 * TransferClock.longestProbeFactor, "the wait stops growing")
        XCTAssertEqual(clock.nextWake, clock.nextDeadline, "the idle deadline came first by now")

        clock.setHolds(.backpressure, at: now)
        XCTAssertNil(clock.nextProbe, "a held transfer waits for Curlew or the caller, not the server")
        clock.setHolds([], at: now + 5)
        XCTAssertEqual(clock.nextProbe, now + 15, "the hold's end restarts the series")

        let off = TransferClock(timeouts: TransferTimeouts(idle: 100, total: 1_000), now: 0)
        XCTAssertNil(off.nextProbe)
        XCTAssertEqual(off.nextWake, 100)
        let huge = TransferClock(timeouts: TransferTimeouts(idle: nil, total: nil), now: 0, firstProbeDelay: .max)
        XCTAssertEqual(huge.nextProbe, .max)
        var overflowing = huge
        overflowing.probed(at: 1)
        XCTAssertNil(overflowing.nextProbe, "a wait that cannot be represented is no probe, not a trap")
        XCTAssertNil(overflowing.nextWake)
    }

    /// The clock restarts only when the last hold ends, from that moment; changing which
    /// holds apply while some remain does not restart it.
    func testTheIdleClockRestartsOnlyWhenNoHoldIsLeft() {
        var clock = TransferClock(timeouts: TransferTimeouts(idle: 100, total: nil), now: 0)
        clock.setHolds([.noConnection, .suspended], at: 0)
        clock.setHolds(.suspended, at: 500)
        XCTAssertNil(clock.nextDeadline, "still suspended")
        XCTAssertNil(clock.expiry(at: 10_000))
        clock.setHolds(.noConnection, at: 20_000)
        XCTAssertNil(clock.expiry(at: 30_000), "still waiting for a connection")
        clock.setHolds([], at: 40_000)
        XCTAssertEqual(clock.nextDeadline, 40_100)
        XCTAssertNil(clock.expiry(at: 40_099))
        XCTAssertEqual(clock.expiry(at: 40_100).map { caseName(of: $0) }, "idle")
        clock.setHolds([], at: 50_000)  // nothing was held: no restart
        XCTAssertEqual(clock.nextDeadline, 40_100)
    }

    func testInfiniteTimeoutsMeanNoLimit() async throws {
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForResource = .infinity
        configuration.timeoutIntervalForRequest = .infinity
        let manager = URLSessionManager.raw(configuration)
        var request = URLRequest(url: try Peer.url("/get"))
        request.timeoutInterval = .infinity
        let response = await manager.response(for: request)
        XCTAssertNil(response.error)
        XCTAssertEqual(response.response?.statusCode, 200)
        var huge = URLRequest(url: try Peer.url("/get"))
        huge.timeoutInterval = 1e300
        let second = await manager.response(for: huge)
        XCTAssertEqual(second.response?.statusCode, 200)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// An upload the server stops reading: the kernel buffers fill, no byte moves, and the
    /// task times out about `timeoutIntervalForRequest` after the last byte was sent (curl's
    /// averaging low-speed check took 7.8 s for a 2 s timeout).
    func testIdleTimeoutFiresSoonAfterTheLastByteMoved() async throws {
        let listener = try LoopbackListener()  // completes the handshake, never reads a byte
        defer { listener.close() }
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForRequest = 2
        let manager = URLSessionManager.raw(configuration)
        let lastProgress = Mutex<UInt64>(DispatchTime.now().uptimeNanoseconds)
        let lastSent = Mutex<Int64>(-1)
        var request = URLRequest(url: try XCTUnwrap(URL(string: "http://127.0.0.1:\(listener.port)/sink")))
        request.httpMethod = "PUT"
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, from: Data(count: 64 << 20), progress: { progress in
                let sent = progress.completedUnitCount
                if lastSent.withLock({ previous in defer { previous = sent }; return previous != sent }) {
                    lastProgress.withLock { $0 = DispatchTime.now().uptimeNanoseconds }
                }
            }, completionHandler: { continuation.resume(returning: $0) }).resume()
        }
        let silence = Double(DispatchTime.now().uptimeNanoseconds - lastProgress.withLock { $0 }) / 1e9
        guard case .timedOut? = response.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: response.error))")
        }
        XCTAssertGreaterThan(lastSent.withLock { $0 }, 0, "some of the body was sent before the stall")
        XCTAssertGreaterThanOrEqual(silence, 1.8, "timed out before 2 s of silence")
        // Generous for a loaded machine, yet far below the 7.8 s of the averaging check.
        XCTAssertLessThan(silence, 5, "timed out \(silence) s after the last byte moved")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testASuspendedTaskIsNotSubjectToTheIdleTimeout() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/drip", response: .stream((0..<4).map { _ in .init(Data("x".utf8), delay: .milliseconds(100)) }))
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForRequest = 1
        let manager = URLSessionManager.raw(configuration)
        let done = expectation(description: "done")
        let outcome = Mutex<DataResponse?>(nil)
        let task = manager.dataTask(with: URLRequest(url: try server.url("/drip"))) { response in
            outcome.withLock { $0 = response }
            done.fulfill()
        }
        task.resume()
        task.suspend()
        try await Task.sleep(nanoseconds: 2_500_000_000)  // longer than the idle timeout
        XCTAssertEqual(task.state, .suspended)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        let response = try XCTUnwrap(outcome.withLock { $0 })
        XCTAssertNil(response.error)
        XCTAssertEqual(response.data, Data("xxxx".utf8))
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
