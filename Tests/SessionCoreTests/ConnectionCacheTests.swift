import CurlewTestSupport
import Dispatch
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// libcurl's connection cache keeps the connections the next requests reuse
/// (`ConnectionCacheLimit`): its own default, four per easy handle in the multi handle when a
/// connection comes back, closed kept-alive connections whenever Curlew's transfers were
/// between a completion and the next request, and the next requests opened them again.
final class ConnectionCacheTests: XCTestCase {
    // MARK: - The rule

    func testTheLimitStartsAtTheFloorAndGrowsWithThePeakOnly() {
        var limit = ConnectionCacheLimit()
        XCTAssertEqual(limit.limit, ConnectionCacheLimit.floor)
        XCTAssertNil(limit.note(transfers: 0))
        XCTAssertNil(limit.note(transfers: -5), "no count below zero changes anything")
        XCTAssertNil(limit.note(transfers: 1))
        XCTAssertNil(limit.note(transfers: 16), "16 transfers x 4 fit in the floor")
        XCTAssertEqual(limit.note(transfers: 17), 68)
        XCTAssertNil(limit.note(transfers: 3), "a lull keeps the limit")
        XCTAssertNil(limit.note(transfers: 17), "the same peak again sets nothing")
        XCTAssertEqual(limit.note(transfers: 100), 400)
        XCTAssertEqual(limit.limit, 400)
        XCTAssertEqual(limit.peakTransfers, 100)
    }

    func testAHugePeakIsClampedToWhatLibcurlAccepts() {
        var limit = ConnectionCacheLimit()
        XCTAssertEqual(limit.note(transfers: Int(Int32.max) / 2), ConnectionCacheLimit.ceiling)
        XCTAssertNil(limit.note(transfers: Int.max), "already at the ceiling: no overflow, no change")
        XCTAssertEqual(limit.limit, Int(Int32.max))
    }

    // MARK: - Against servers

    /// One request at a time to six origins in turn, three rounds: each origin's connection is
    /// kept for its next request. With libcurl's default the limit was four (one handle in the
    /// multi handle), so the fifth origin's connection closed the first one's, and every
    /// request after the first round opened a new connection.
    func testOneRequestAtATimeToSixOriginsKeepsEveryConnection() async throws {
        let accepted = try await connectionsPerOrigin(afterRounds: 3, with: .default)
        XCTAssertEqual(accepted, Array(repeating: 1, count: 6))
    }

    /// The same six origins in turn under `httpMaximumConnections = 2`: the larger cache does
    /// not hold idle connections the cap needs, so no request waits for one (libcurl closes
    /// the oldest idle connection to open the next), and every request of the round opens its
    /// own: 18 connections, never more than 2 at once by the cap.
    func testATotalConnectionCapStillClosesIdleConnectionsForTheNextRequest() async throws {
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnections = 2
        let accepted = try await connectionsPerOrigin(afterRounds: 3, with: configuration)
        XCTAssertEqual(accepted, Array(repeating: 3, count: 6))
    }

    /// Sends one request at a time to six origins in turn, `rounds` times, through a manager
    /// with `configuration` (each must be answered); returns how many connections each origin
    /// accepted.
    private func connectionsPerOrigin(afterRounds rounds: Int, with configuration: SessionConfiguration) async throws -> [Int] {
        let servers = try (0..<6).map { _ in try TestServer() }
        defer { servers.forEach { $0.shutdown() } }
        for server in servers { server.route("/poll", response: .text("ok")) }
        let manager = URLSessionManager.raw(configuration)
        for round in 1...rounds {
            for server in servers {
                let response = await manager.response(for: URLRequest(url: try server.url("/poll")))
                XCTAssertNil(response.error, "round \(round)")
            }
        }
        let accepted = servers.map(\.acceptedConnectionCount)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        return accepted
    }

    /// 80 requests at once (more than the floor covers: the limit follows the peak), then a lull
    /// of one request at a time, then 80 at once again: the second burst reuses the first
    /// one's 80 connections. With libcurl's default each request of the lull closed one idle
    /// connection; with the floor alone the first burst's last 16 closed as they came back.
    func testABurstAboveTheFloorKeepsItsConnectionsThroughALull() async throws {
        let burst = 80
        let first = ArrivalBarrier(count: burst)
        let second = ArrivalBarrier(count: burst)
        let server = try ScriptedServer(connections: 3 * burst) { socket, server in
            // Keep-alive: every request on this connection, until the client closes it.
            while let head = server.readHead(socket) {
                if head.hasPrefix("GET /burst1 ") { first.arrive() }
                if head.hasPrefix("GET /burst2 ") { second.arrive() }
                guard server.write(socket, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") else { return }
            }
        }
        defer { server.stop() }
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 2 * burst
        let manager = URLSessionManager.raw(configuration)

        try await requests(burst, to: "\(server.baseURLString)/burst1", with: manager)
        XCTAssertTrue(first.allArrived, "the first burst was not in flight at once")
        XCTAssertEqual(server.acceptedCount, burst)
        for _ in 0..<10 {
            let response = await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: "\(server.baseURLString)/lull"))))
            XCTAssertNil(response.error)
        }
        try await requests(burst, to: "\(server.baseURLString)/burst2", with: manager)
        XCTAssertTrue(second.allArrived, "the second burst was not in flight at once")
        XCTAssertEqual(server.acceptedCount, burst, "the second burst opened connections the first one had")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A manager let go without `invalidateSessionCancelingTasks` while its cache holds 40 idle
    /// connections (more than libcurl's own default would have kept): every one is closed, and
    /// the process has the descriptors it had before.
    func testAManagerLetGoClosesEveryIdleConnection() async throws {
        let server = try TestServer { _ in
            var response = TestResponse.text("ok")
            response.delayBeforeHead = .milliseconds(200)  // forty at once need forty connections
            return response
        }
        defer { server.shutdown() }
        let descriptorsBefore = openFileDescriptorCount()  // the server's own are counted
        weak var released: URLSessionManager?
        do {
            var configuration = SessionConfiguration.default
            configuration.httpMaximumConnectionsPerHost = 40
            let manager = URLSessionManager.raw(configuration)
            released = manager
            try await requests(40, to: "\(server.baseURLString)/idle", with: manager)
            XCTAssertGreaterThan(server.acceptedConnectionCount, 1)
            XCTAssertEqual(server.openConnectionCount, server.acceptedConnectionCount, "kept alive, idle")
        }
        try await eventually({ released == nil }, "the manager outlived its last reference")
        XCTAssertTrue(server.waitForAllConnectionsClosed(timeout: .seconds(20)), "idle connections left open")
        try await eventually({ openFileDescriptorCount() <= descriptorsBefore }, "descriptors: \(openFileDescriptorCount()) against \(descriptorsBefore)")
    }

    /// Sends `count` GETs to `url` at once and waits for every answer.
    private func requests(_ count: Int, to url: String, with manager: URLSessionManager) async throws {
        let request = URLRequest(url: try XCTUnwrap(URL(string: url)))
        let errors = await withTaskGroup(of: (any Error)?.self) { group in
            for _ in 0..<count { group.addTask { await manager.response(for: request).error } }
            var errors: [String] = []
            for await error in group { if let error { errors.append("\(error)") } }
            return errors
        }
        XCTAssertEqual(errors, [], "\(url)")
    }
}

/// Holds every arriving request until `count` have arrived, so that `count` connections are
/// open at once. A bound, never an assertion: when one waits 60 seconds in vain the barrier
/// breaks, lets every request through, and `allArrived` says false.
private final class ArrivalBarrier: Sendable {
    private let count: Int
    private let state = Mutex<(arrived: Int, broken: Bool)>((0, false))
    private let gate = DispatchSemaphore(value: 0)

    init(count: Int) { self.count = count }

    /// Whether all `count` requests were held at once, none let through early.
    var allArrived: Bool { state.withLock { $0.arrived >= count && !$0.broken } }

    /// Called by each request; returns once all have arrived (or the barrier broke).
    func arrive() {
        let (now, broken) = state.withLock { state -> (Int, Bool) in
            state.arrived += 1
            return (state.arrived, state.broken)
        }
        guard !broken, now <= count else { return }
        if now == count {
            for _ in 1..<count { gate.signal() }
            return
        }
        if gate.wait(timeout: .now() + 60) == .timedOut {
            state.withLock { $0.broken = true }
            for _ in 0..<count { gate.signal() }  // the others, each of which would wait as long
        }
    }
}
