import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Per-host pins across handshakes: report-only sets and their reports, kept-alive
/// connections and resumed TLS sessions (never a way past a failing pin), and an HTTPS proxy
/// with pins of its own.
final class PerHostPinReuseTests: XCTestCase {
    private typealias Pins = PerHostPinTests

    // MARK: - Reports

    /// Report-only: the handshake goes on, one report per handshake with the host, port, the
    /// verified chain's pins (leaf first, anchor last) and the expected pins, on the manager's
    /// report queue. A second request on the kept-alive connection makes no new handshake and
    /// no new report.
    func testReportOnlyReportsOncePerHandshakeAndLetsTheRequestThrough() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let reports = Pins.Reports()
        let expected: Set<String> = [try Pins.pin(certificates.leafNewKey), try Pins.pin(certificates.unrelatedRoot)]
        let manager = try Pins.manager([PinSet(host: "localhost", pins: expected, reportOnly: true)], reports: reports)
        let first = await manager.get(try Pins.url(server, "/1"))
        XCTAssertTrue(TLSFixture.isSuccess(first), "\(first.result)")
        let second = await manager.get(try Pins.url(server, "/2"))
        XCTAssertTrue(TLSFixture.isSuccess(second), "\(second.result)")
        XCTAssertEqual(second.metrics?.transactionMetrics.last?.isReusedConnection, true)
        await manager.waitUntilInvalidatedAfterUse()
        let served = [try Pins.pin(certificates.leaf), try Pins.pin(certificates.intermediate), try Pins.pin(certificates.root)]
        XCTAssertEqual(
            reports.all(after: manager),
            [PinFailureReport(host: "localhost", port: server.port, servedPins: served, expectedPins: expected, enforced: false)])
        XCTAssertTrue(reports.allOnReportQueue(), "reports run on the manager's queue, never on the driver")
        XCTAssertEqual(server.requests.count, 2)
    }

    func testAnEnforcedFailureIsReportedOnceWithEnforcedSet() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let reports = Pins.Reports()
        let manager = try Pins.manager([PinSet(host: "127.0.0.1", pins: [try Pins.pin(certificates.leafNewKey)])], reports: reports)
        let refused = await manager.get(server.baseURL.appendingPathComponent("x"))
        await manager.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(refused.result)")
        let received = reports.all(after: manager)
        XCTAssertEqual(received.count, 1)
        XCTAssertEqual(received.first?.host, "127.0.0.1")
        XCTAssertEqual(received.first?.port, server.port)
        XCTAssertEqual(received.first?.enforced, true)
        XCTAssertEqual(received.first?.servedPins.first, try Pins.pin(certificates.leaf))
    }

    // MARK: - Reuse and resumption

    /// Positive control: a passing pin keeps connection reuse and TLS resumption working.
    func testPassingPinsKeepReuseAndResumption() async throws {
        let certificates = try TLSFixture.certificates()
        let manager = try Pins.manager([PinSet(host: "localhost", pins: [try Pins.pin(certificates.leaf)])])
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let kept = try TLSFixture.server(certificates.leaf)
        defer { kept.shutdown() }
        for index in 0..<2 {
            let response = await manager.get(try Pins.url(kept, "/\(index)"))
            XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
        }
        XCTAssertEqual(kept.handshakeCount, 1, "the second request reused the connection")
        let closing = try TLSFixture.server(certificates.leaf, keepAlive: false)
        defer { closing.shutdown() }
        for index in 0..<3 {
            let response = await manager.get(try Pins.url(closing, "/\(index)"))
            XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
            XCTAssertTrue(closing.waitForAllConnectionsClosed())
        }
        XCTAssertGreaterThanOrEqual(manager.engine.security.statistics.withLock { $0.admittedResumedSessions }, 1)
    }

    /// A host whose pin fails gets no connection and no session to reuse: each request makes
    /// its own handshake, and each is refused.
    func testEveryRequestToAFailingHostIsRefusedByAHandshakeOfItsOwn() async throws {
        let certificates = try TLSFixture.certificates()
        for keepAlive in [true, false] {
            let server = try TLSFixture.server(certificates.leaf, keepAlive: keepAlive)
            defer { server.shutdown() }
            let manager = try Pins.manager([PinSet(host: "localhost", pins: [try Pins.pin(certificates.leafNewKey)])])
            for index in 0..<2 {
                let response = await manager.get(try Pins.url(server, "/\(index)"))
                XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .noPinMatched, "keepAlive \(keepAlive) #\(index): \(response.result)")
            }
            await manager.waitUntilInvalidatedAfterUse()
            let statistics = manager.engine.security.statistics.withLock { $0 }
            XCTAssertEqual(statistics.refusedHandshakes, 2, "keepAlive \(keepAlive): \(statistics)")
            XCTAssertEqual(statistics.admittedResumedSessions + statistics.admittedReusedConnections, 0, "\(statistics)")
            XCTAssertEqual(server.recordedApplicationBytes, 0)
        }
    }

    /// Two managers sharing a cookie jar share its TLS session cache. A session that a manager
    /// without pins cached is offered to a manager whose pin fails for that host: it is refused
    /// before the request is sent, and the full handshake that follows is refused by the pin.
    func testASessionResumedFromAnotherManagerIsStillJudgedByThePins() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf, keepAlive: false)
        defer { server.shutdown() }
        let jar = CookieJar()
        let unpinned = try Pins.manager([], jar: jar)
        for index in 0..<2 {
            let response = await unpinned.get(try Pins.url(server, "/\(index)"))
            XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
            XCTAssertTrue(server.waitForAllConnectionsClosed())
        }
        XCTAssertGreaterThanOrEqual(unpinned.engine.security.statistics.withLock { $0.admittedResumedSessions }, 1, "sessions are cached")
        let pinned = try Pins.manager([PinSet(host: "localhost", pins: [try Pins.pin(certificates.leafNewKey)])], jar: jar)
        let bytesBefore = server.recordedApplicationBytes
        let refused = await pinned.get(try Pins.url(server, "/pinned"))
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(refused.result)")
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(server.recordedApplicationBytes, bytesBefore)
        let statistics = pinned.engine.security.statistics.withLock { $0 }
        XCTAssertGreaterThanOrEqual(statistics.refusedStaleConnections, 1, "the shared session was offered and refused: \(statistics)")
        XCTAssertEqual(statistics.admittedResumedSessions, 0, "\(statistics)")
        XCTAssertEqual(statistics.refusedHandshakes, 1, "\(statistics)")
        await unpinned.waitUntilInvalidatedAfterUse()
        await pinned.waitUntilInvalidatedAfterUse()
    }

    // MARK: - HTTPS proxy

    /// An origin with the test leaf and an HTTPS CONNECT proxy with another key, and each
    /// one's pin.
    private func proxyFixture() throws -> (TestServer, HTTPSProxyTests.TLSConnectProxy, String, String) {
        let certificates = try TLSFixture.certificates()
        let pins = (origin: try Pins.pin(certificates.leaf), proxy: try Pins.pin(certificates.leafNewKey))
        let origin = try TLSFixture.server(certificates.leaf)
        do {
            let proxy = try HTTPSProxyTests.TLSConnectProxy(
                certificateChain: certificates.leafNewKey.chainPEM, privateKey: certificates.leafNewKey.privateKeyPEM)
            return (origin, proxy, pins.origin, pins.proxy)
        } catch {
            origin.shutdown()
            throw error
        }
    }

    private func proxyManager(
        proxyPort: Int, proxyHost: String = "127.0.0.1", origin: [PinSet], proxy: [PinSet]?, reports: Pins.Reports? = nil
    ) throws -> URLSessionManager {
        let certificates = try TLSFixture.certificates()
        var configuration = SessionConfiguration.default
        configuration.proxy = .url("https://\(proxyHost):\(proxyPort)")
        configuration.certificateAuthorityFile = certificates.root.certificatePEM.path
        configuration.timeoutIntervalForRequest = 15
        configuration.pinningPolicy = PinningPolicy(pinSets: origin)
        configuration.proxyPinningPolicy = proxy.map { PinningPolicy(pinSets: $0, report: reports?.callback) }
        let manager = URLSessionManager(configuration: configuration)
        manager.securityPolicy = try TLSFixture.trustingTestRoot()
        manager.engine.security.pinReportQueue.setSpecific(key: Pins.Reports.queueKey, value: 1)
        return manager
    }

    /// The proxy is judged by its own pins, the origin behind it by the origin's: neither
    /// policy ever judges the other's server.
    func testAnHTTPSProxyIsJudgedByItsOwnPins() async throws {
        let (origin, proxy, originPin, proxyPin) = try proxyFixture()
        defer { origin.shutdown() }
        defer { proxy.stop() }
        let url = try Pins.url(origin, "/through")

        // Each pinned to its own key, under host patterns that also cover the other: accepted.
        let good = try proxyManager(
            proxyPort: proxy.port, origin: [PinSet(host: "localhost", pins: [originPin]), PinSet(host: "127.0.0.1", pins: [originPin])],
            proxy: [PinSet(host: "127.0.0.1", pins: [proxyPin]), PinSet(host: "localhost", pins: [proxyPin])])
        let accepted = await good.get(url)
        XCTAssertTrue(TLSFixture.isSuccess(accepted), "\(accepted.result)")
        XCTAssertEqual(origin.requests.map(\.path), ["/through"])
        await good.waitUntilInvalidatedAfterUse()

        // The proxy's pin fails: refused before the tunnel carries anything, reported as the proxy's.
        let reports = Pins.Reports()
        let wrongProxy = try proxyManager(
            proxyPort: proxy.port, origin: [PinSet(host: "localhost", pins: [originPin])],
            proxy: [PinSet(host: "127.0.0.1", pins: [originPin])], reports: reports)
        let refused = await wrongProxy.get(url)
        await wrongProxy.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(refused.result)")
        XCTAssertEqual(origin.requests.count, 1)
        let received = reports.all(after: wrongProxy)
        XCTAssertEqual(received.map(\.host), ["127.0.0.1"])
        XCTAssertEqual(received.first?.port, proxy.port)
        XCTAssertEqual(received.first?.servedPins.first, proxyPin)
        XCTAssertEqual(received.first?.enforced, true)

        // The origin's pin fails behind a proxy whose pin passes.
        let wrongOrigin = try proxyManager(
            proxyPort: proxy.port, origin: [PinSet(host: "localhost", pins: [proxyPin])], proxy: [PinSet(host: "127.0.0.1", pins: [proxyPin])])
        let refusedOrigin = await wrongOrigin.get(url)
        await wrongOrigin.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(TLSFixture.trustFailure(refusedOrigin)?.reason, .noPinMatched, "\(refusedOrigin.result)")
        XCTAssertEqual(origin.requests.count, 1)
    }

    /// The same where the server name cannot tell the two handshakes apart: a proxy and an
    /// origin both given as addresses (libcurl sends neither a server name), and both given
    /// as `localhost`. Each is still judged by its own pins: the proxy's by the proxy's, the
    /// origin's by the origin's, and a refusal names the peer that failed.
    func testAProxyAndAnOriginTheServerNameCannotTellApartAreEachJudgedByTheirOwnPins() async throws {
        let (origin, proxy, originPin, proxyPin) = try proxyFixture()
        defer { origin.shutdown() }
        defer { proxy.stop() }
        var expectedRequests = 0
        for host in ["127.0.0.1", "localhost"] {
            let url = try Pins.url(origin, host: host, "/through")
            // Each pinned to its own key: accepted (the proxy's handshake was judged by the
            // origin's pins, and refused).
            let good = try proxyManager(
                proxyPort: proxy.port, proxyHost: host, origin: [PinSet(host: host, pins: [originPin])],
                proxy: [PinSet(host: host, pins: [proxyPin])])
            let accepted = await good.get(url)
            await good.waitUntilInvalidatedAfterUse()
            XCTAssertTrue(TLSFixture.isSuccess(accepted), "\(host): \(accepted.result)")
            expectedRequests += 1
            XCTAssertEqual(origin.requests.count, expectedRequests, host)

            // The proxy's pin fails and the origin has none: refused, reported as the proxy's
            // (the proxy's handshake was judged as the origin's, and passed).
            let reports = Pins.Reports()
            let wrongProxy = try proxyManager(
                proxyPort: proxy.port, proxyHost: host, origin: [], proxy: [PinSet(host: host, pins: [originPin])], reports: reports)
            let refused = await wrongProxy.get(url)
            await wrongProxy.waitUntilInvalidatedAfterUse()
            XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(host): \(refused.result)")
            XCTAssertEqual(origin.requests.count, expectedRequests, host)
            let received = reports.all(after: wrongProxy)
            XCTAssertEqual(received.first?.port, proxy.port, host)
            XCTAssertEqual(received.first?.servedPins.first, proxyPin, host)
        }
    }

    /// A plain http request through a pinned HTTPS proxy: the proxy's handshake is judged too.
    func testAPlainHTTPRequestThroughAPinnedProxyIsRefusedWhenTheProxyPinFails() async throws {
        let certificates = try TLSFixture.certificates()
        let proxy = try HTTPSProxyTests.TLSConnectProxy(
            certificateChain: certificates.leafNewKey.chainPEM, privateKey: certificates.leafNewKey.privateKeyPEM)
        defer { proxy.stop() }
        let manager = try proxyManager(
            proxyPort: proxy.port, origin: [], proxy: [PinSet(host: "127.0.0.1", pins: [try Pins.pin(certificates.leaf)])])
        let refused = await manager.get(try XCTUnwrap(URL(string: "http://localhost:9/plain")))
        await manager.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(refused.result)")
    }
}
