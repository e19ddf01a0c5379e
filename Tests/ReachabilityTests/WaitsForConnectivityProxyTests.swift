import Foundation
import Glibc
@testable import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import Reachability

/// `waitsForConnectivity` meets proxies: a request through a proxy connects to the proxy
/// only, so the route that matters is the proxy's. The wait watched the origin's route (or
/// the default route) instead: a refused proxy waited for a route to an origin it never
/// connects to, and a proxy with no route failed at once beside an origin with one.
extension WaitsForConnectivityTests {
    /// An address on the far side of the veth pair, in a subnet the client's routes may
    /// refuse (`unreachable`) while its default route stays.
    static let proxyAddress = "203.0.113.7"

    /// A task's response, once it completed.
    final class Completion: Sendable {
        private let response = Mutex<DataResponse?>(nil)
        func withLock<T>(_ body: (inout DataResponse?) -> T) -> T { response.withLock { body(&$0) } }
    }

    private func request(_ manager: URLSessionManager, _ text: String) throws -> Completion {
        let done = Completion()
        let url = try XCTUnwrap(URL(string: text))
        manager.dataTask(with: URLRequest(url: url)) { response in done.withLock { $0 = response } }.resume()
        return done
    }

    /// No default route, a route to the proxy, nothing listening on the proxy's port: the
    /// refusal stands at once, whatever the origin (a name, an address without a route).
    func testARefusedProxyWithARouteFailsAtOnce() throws {
        try connectAndSettle()
        let origins = ["http://203.0.113.5/", "http://example.invalid/"]
        for origin in origins {
            let events = Events()
            let manager = try makeManager(
                waits: true, resourceTimeout: 20, proxy: .url("http://\(Self.hostAddress):9"), events: events)
            let done = try request(manager, origin)
            XCTAssertTrue(waitUntil { done.withLock { $0 } != nil }, origin)
            guard case .cannotConnect = done.withLock({ $0 })?.error as? SessionError else {
                XCTFail("\(origin): expected cannotConnect, got \(String(describing: done.withLock { $0 }?.error))")
                continue
            }
            XCTAssertTrue(waitUntil { events.hasEnded }, "\(origin): no completion event: \(events.recorded)")
            XCTAssertFalse(events.recorded.contains("waiting"), "\(origin): \(events.recorded)")
        }
    }

    /// The same from the environment (this test runs in a process of its own): the proxy is
    /// `http_proxy`'s, and `no_proxy` sends a host direct, whose missing route is then the
    /// one waited for.
    func testTheEnvironmentsProxyAndBypassListDecideWhichRouteIsWaitedFor() throws {
        try connectAndSettle()
        setenv("http_proxy", "http://\(Self.hostAddress):9", 1)
        setenv("no_proxy", "203.0.113.5", 1)
        let events = Events()
        let manager = try makeManager(waits: true, resourceTimeout: 20, proxy: .environment, events: events)
        let proxied = try request(manager, "http://example.invalid/")
        XCTAssertTrue(waitUntil { proxied.withLock { $0 } != nil })
        guard case .cannotConnect = proxied.withLock({ $0 })?.error as? SessionError else {
            return XCTFail("expected cannotConnect, got \(String(describing: proxied.withLock { $0 }?.error))")
        }
        XCTAssertFalse(events.recorded.contains("waiting"), "\(events.recorded)")

        let direct = manager.dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "http://203.0.113.5/"))), completionHandler: nil)
        direct.resume()
        XCTAssertTrue(waitUntil { events.recorded.contains("waiting") }, "the bypassed host's missing route: \(events.recorded)")
        XCTAssertNotEqual(direct.state, .completed)
        direct.cancel()
        XCTAssertTrue(waitUntil { direct.state == .completed })
        XCTAssertTrue(waitUntil { ConnectivityWait.runningMonitorCount == 0 }, "the route monitor must stop")
    }

    /// A default route, but the proxy's subnet refused (`unreachable`): requests wait, an
    /// origin with a route and `localhost` (which libcurl 7.88 sends through the proxy too)
    /// alike, and go out through the proxy once its route is there.
    func testAProxyWithoutARouteMakesTheRequestWaitForOne() throws {
        try connectAndSettle()
        try addDefaultRoute()
        try client.ip("link", "set", "lo", "up")
        try host.ip("addr", "add", "\(Self.proxyAddress)/32", "dev", "crl0p")
        try client.ip("route", "add", "unreachable", "203.0.113.0/24")
        let port = try startResponder(at: Self.proxyAddress)
        let events = Events()
        let manager = try makeManager(waits: true, proxy: .url("http://\(Self.proxyAddress):\(port)"), events: events)
        let origins = ["http://\(Self.hostAddress):9/", "http://localhost:1/"]
        var responses: [Completion] = []
        for origin in origins {
            responses.append(try request(manager, origin))
            XCTAssertTrue(
                waitUntil { events.recorded.filter { $0 == "waiting" }.count == responses.count }, "\(origin): \(events.recorded)")
        }
        XCTAssertTrue(responses.allSatisfy { $0.withLock { $0 } == nil }, "the tasks must wait, not fail")
        try client.ip("route", "del", "unreachable", "203.0.113.0/24")  // the default route leads there now
        for (origin, done) in zip(origins, responses) {
            XCTAssertTrue(waitUntil { done.withLock { $0 } != nil }, "\(origin): never completed")
            XCTAssertNil(done.withLock { $0 }?.error, "\(origin): \(String(describing: done.withLock { $0 }?.error))")
            XCTAssertEqual(done.withLock { $0 }?.response?.statusCode, 200, origin)
        }
        XCTAssertTrue(waitUntil { events.recordedByTask.values.allSatisfy { $0.contains("completed") } }, "\(events.recorded)")
        for (identifier, names) in events.recordedByTask {
            XCTAssertEqual(names, ["willSend", "waiting", "willSend", "completed"], "task #\(identifier)")
        }
        XCTAssertTrue(waitUntil { ConnectivityWait.runningMonitorCount == 0 }, "the route monitors must stop")
    }

    /// A wait on several routes (an override's addresses, the two proxies of an http URL HSTS
    /// may upgrade) waits only while all of them are missing: one that is there decides at
    /// once; when all are missing, the first to appear ends the wait.
    func testAWaitOnSeveralRoutesEndsWithTheFirstOneThere() throws {
        try connectAndSettle()
        try client.ip("route", "add", "unreachable", "203.0.113.0/24")
        try client.ip("route", "add", "unreachable", "192.0.2.0/24")
        final class Outcome: @unchecked Sendable {  // `lock` guards both
            private let lock = NSLock()
            private var waited = false
            private var decision: Bool?
            func noteWaiting() { lock.withLock { waited = true } }
            func decide(_ returned: Bool) { lock.withLock { decision = returned } }
            var state: (waited: Bool, decision: Bool?) { lock.withLock { (waited, decision) } }
        }
        func wait(for targets: [ConnectivityWait.Target]) throws -> (ConnectivityWait, Outcome) {
            let outcome = Outcome()
            let wait = try client.perform {
                ConnectivityWait(targets: targets, waiting: { outcome.noteWaiting() }, decided: { outcome.decide($0) })
            }
            return (wait, outcome)
        }
        // One of them is there: the error stands, with no wait (in either order: the monitors
        // report in any order).
        for targets in [[ConnectivityWait.Target.ipv4("203.0.113.7"), .ipv4(Self.hostAddress)], [.ipv4(Self.hostAddress), .ipv4("203.0.113.7")]] {
            let (present, presentOutcome) = try wait(for: targets)
            XCTAssertTrue(waitUntil { presentOutcome.state.decision != nil })
            XCTAssertEqual(presentOutcome.state.decision, false, "\(targets)")
            XCTAssertFalse(presentOutcome.state.waited, "\(targets)")
            present.cancel()
        }
        // All missing: a wait, which the second route's return ends.
        let (missing, missingOutcome) = try wait(for: [.ipv4("203.0.113.7"), .ipv4("192.0.2.7")])
        XCTAssertTrue(waitUntil { missingOutcome.state.waited })
        XCTAssertNil(missingOutcome.state.decision)
        try client.ip("route", "del", "unreachable", "192.0.2.0/24")
        try client.ip("route", "add", "192.0.2.0/24", "via", Self.hostAddress)
        XCTAssertTrue(waitUntil { missingOutcome.state.decision != nil })
        XCTAssertEqual(missingOutcome.state.decision, true)
        missing.cancel()
        XCTAssertTrue(waitUntil { ConnectivityWait.runningMonitorCount == 0 }, "the route monitors must stop")
    }
}
