import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Name resolution and addresses as `SessionConfiguration` settings (libcurl's
/// `CURLOPT_RESOLVE`, `CONNECT_TO`, `INTERFACE`, `IPRESOLVE`, ...), against the in-process
/// server on 127.0.0.1 reached under names no DNS knows.
final class NetworkSettingsTests: XCTestCase {
    private var server: TestServer!

    override func setUpWithError() throws {
        server = try TestServer { request in .text("host=\(request.header("Host") ?? "-")") }
    }

    override func tearDown() {
        server.shutdown()
    }

    private func get(_ url: String, _ change: (inout SessionConfiguration) throws -> Void) async throws -> DataResponse {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.timeoutIntervalForRequest = 10
        try change(&configuration)
        let manager = URLSessionManager.raw(configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        return await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: url))))
    }

    private func body(_ response: DataResponse) -> String? {
        response.data.map { String(decoding: $0, as: UTF8.self) }
    }

    func testAResolveOverrideSendsANameToTheLoopbackServer() async throws {
        let port = server.port
        let response = try await get("http://api.example.test:\(port)/") {
            $0.hostOverrides = [try .resolve("api.example.test", port: port, to: ["127.0.0.1"])]
        }
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(body(response), "host=api.example.test:\(port)", "the request itself still names the URL's host")
        XCTAssertEqual(response.metrics?.remoteAddress, "127.0.0.1")
    }

    /// A handle reused without a reset keeps its base options, but libcurl loads `.resolve`
    /// overrides into the DNS cache of the share the handle is in, only when the option is
    /// set: after a policy change put the handle in a new share, the overridden name went to
    /// the system's resolver (a real name: to the real server).
    func testAResolveOverrideHoldsAfterThePolicyChanged() async throws {
        let served = Mutex(0)
        let server = try TestServer { _ in
            // The second answer closes its connection: the next request needs a new one.
            served.withLock { count in count += 1; return count } == 2
                ? TestResponse(status: 200, headers: [("Connection", "close")], body: Data("ok".utf8)) : .text("ok")
        }
        defer { server.shutdown() }
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.hostOverrides = [try .resolve("curlew-override.invalid", port: server.port, to: ["127.0.0.1"])]
        let manager = URLSessionManager.raw(configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let url = try XCTUnwrap(URL(string: "http://curlew-override.invalid:\(server.port)/"))
        let first = await manager.response(for: URLRequest(url: url))
        let second = await manager.response(for: URLRequest(url: url))
        XCTAssertEqual([first, second].map(\.response?.statusCode), [200, 200])
        XCTAssertEqual(second.metrics?.isReusedConnection, true, "the handle goes back without a reset")
        var policy = SecurityPolicy(pinningMode: .none)
        policy.validatesDomainName = false
        manager.securityPolicy = policy  // another policy: a new share (its TLS sessions, its DNS cache)
        let third = await manager.response(for: URLRequest(url: url))
        XCTAssertEqual(third.response?.statusCode, 200, "\(third.result)")
        XCTAssertEqual(third.metrics?.remoteAddress, "127.0.0.1")
    }

    func testAConnectToOverrideSendsAHostAndPortElsewhere() async throws {
        let port = server.port
        let response = try await get("http://api.example.test/") {
            $0.hostOverrides = [try .connect("api.example.test", port: 80, to: "127.0.0.1", port: port)]
        }
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(body(response), "host=api.example.test")
    }

    /// The override names an IPv6 and an IPv4 address; the server listens on IPv4 only.
    func testTheAddressFamilyRestrictsWhichAddressesAreUsed() async throws {
        let port = server.port
        let overrides = [try HostOverride.resolve("api.example.test", port: port, to: ["::1", "127.0.0.1"])]
        let ipv4 = try await get("http://api.example.test:\(port)/") {
            $0.hostOverrides = overrides
            $0.addressFamily = .ipv4
            $0.happyEyeballsDelay = 0.05
        }
        XCTAssertEqual(ipv4.response?.statusCode, 200, "\(ipv4.result)")
        XCTAssertEqual(ipv4.metrics?.remoteAddress, "127.0.0.1")
        let ipv6 = try await get("http://api.example.test:\(port)/") {
            $0.hostOverrides = overrides
            $0.addressFamily = .ipv6
        }
        XCTAssertNil(ipv6.response, "only ::1 may be tried, where nothing listens")
        XCTAssertNotNil(ipv6.error)
    }

    func testConnectionsAreMadeFromTheConfiguredInterfaceOrAddress() async throws {
        let url = "http://127.0.0.1:\(server.port)/"
        let interface = try await get(url) { $0.localEndpoint = try .interface("lo") }
        XCTAssertEqual(interface.response?.statusCode, 200, "\(interface.result)")
        XCTAssertEqual(interface.metrics?.finalTransaction?.localAddress, "127.0.0.1")
        let address = try await get(url) { $0.localEndpoint = try .address("127.0.0.1") }
        XCTAssertEqual(address.response?.statusCode, 200, "\(address.result)")
        XCTAssertEqual(address.metrics?.finalTransaction?.localAddress, "127.0.0.1")
        // An address this machine does not have (TEST-NET-1) cannot be bound: the setting is
        // applied, not ignored.
        let foreign = try await get(url) { $0.localEndpoint = try .address("192.0.2.1") }
        XCTAssertNil(foreign.response, "bound to an address the machine does not have")
        guard case .cannotConnect? = foreign.error as? SessionError else {
            return XCTFail("expected cannotConnect, got \(String(describing: foreign.error))")
        }
    }

    func testTheDNSCacheLifetimeIsAccepted() async throws {
        let port = server.port
        for lifetime in [0, 5, -1, .infinity] as [TimeInterval] {
            let response = try await get("http://api.example.test:\(port)/") {
                $0.hostOverrides = [try .resolve("api.example.test", port: port, to: ["127.0.0.1"])]
                $0.dnsCacheLifetime = lifetime
            }
            XCTAssertEqual(response.response?.statusCode, 200, "lifetime \(lifetime): \(response.result)")
        }
    }

    func testDNSServersWithoutCAresFailWithATypedError() async throws {
        try XCTSkipIf(SessionConfiguration.supportsDNSServers, "this libcurl has c-ares")
        let response = try await get("http://127.0.0.1:\(server.port)/") { $0.dnsServers = [try DNSServer("127.0.0.1")] }
        guard case .invalidConfiguration(let message)? = response.error as? SessionError else {
            return XCTFail("expected invalidConfiguration, got \(String(describing: response.error))")
        }
        XCTAssertTrue(message.contains("c-ares"), message)
        XCTAssertEqual(server.acceptedConnectionCount, 0, "nothing was sent with the system's resolver instead")
    }

    func testInvalidValuesAreRejectedWhenMade() {
        func error(_ make: () throws -> Any) -> NetworkSettingError? {
            do {
                _ = try make()
                return nil
            } catch {
                return error as? NetworkSettingError
            }
        }
        XCTAssertEqual(error { try HostOverride.resolve("", port: 80, to: ["127.0.0.1"]) }, .invalidHostName(""))
        XCTAssertEqual(error { try HostOverride.resolve("a:b", port: 80, to: ["127.0.0.1"]) }, .invalidHostName("a:b"))
        XCTAssertEqual(error { try HostOverride.resolve("a,b", port: 80, to: ["127.0.0.1"]) }, .invalidHostName("a,b"))
        XCTAssertEqual(error { try HostOverride.resolve("a", port: 0, to: ["127.0.0.1"]) }, .invalidPort(0))
        XCTAssertEqual(error { try HostOverride.resolve("a", port: 70000, to: ["127.0.0.1"]) }, .invalidPort(70000))
        XCTAssertEqual(error { try HostOverride.resolve("a", port: 80, to: []) }, .noAddresses(host: "a"))
        XCTAssertEqual(error { try HostOverride.resolve("a", port: 80, to: ["127.0.0.1,10.0.0.1"]) }, .invalidAddress("127.0.0.1,10.0.0.1"))
        XCTAssertEqual(error { try HostOverride.resolve("a", port: 80, to: ["localhost"]) }, .invalidAddress("localhost"))
        XCTAssertEqual(error { try HostOverride.resolve("a", port: 80, to: ["256.1.1.1"]) }, .invalidAddress("256.1.1.1"))
        XCTAssertEqual(error { try HostOverride.connect("a", port: 80, to: "b c", port: 81) }, .invalidHostName("b c"))
        XCTAssertEqual(error { try HostOverride.connect("a", port: 80, to: "b", port: -1) }, .invalidPort(-1))
        XCTAssertEqual(error { try LocalEndpoint.interface("") }, .invalidInterfaceName(""))
        XCTAssertEqual(error { try LocalEndpoint.interface("a-very-long-interface") }, .invalidInterfaceName("a-very-long-interface"))
        XCTAssertEqual(error { try LocalEndpoint.interface("eth0!x") }, .invalidInterfaceName("eth0!x"))
        XCTAssertEqual(error { try LocalEndpoint.address("lo") }, .invalidAddress("lo"))
        XCTAssertEqual(error { try DNSServer("dns.example") }, .invalidAddress("dns.example"))
        XCTAssertEqual(error { try DNSServer("1.1.1.1", port: 0) }, .invalidPort(0))
        // Good values in libcurl's syntax, IPv6 bracketed.
        XCTAssertEqual(try HostOverride.resolve("a.test", port: 443, to: ["::1", "127.0.0.1"]).description, "a.test:443:[::1],127.0.0.1")
        XCTAssertEqual(try HostOverride.connect("a.test", port: 80, to: "::1", port: 8080).description, "a.test:80:[::1]:8080")
        XCTAssertEqual(try LocalEndpoint.interface("lo").description, "if!lo")
        XCTAssertEqual(try LocalEndpoint.address("[::1]").description, "host!::1")
        XCTAssertEqual(try DNSServer("::1", port: 5353).description, "[::1]:5353")
    }
}
