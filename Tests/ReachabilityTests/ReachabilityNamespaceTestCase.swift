import Foundation
import Glibc
import Synchronization
import XCTest
@testable import Reachability

/// Base class: each test gets a fresh "client" namespace (where managers run) and a "host"
/// namespace joined to it by a veth pair (`crl0` in the client, `crl0p` in the host), so
/// nothing touches the machine's own interfaces or routes. The `dummy` link kind is not
/// available in every sandbox, so a veth pair stands in for the client's uplink.
///
/// Each test runs in a child process of its own (`ChildProcessTest`): threads started by
/// a thread inside a namespace inherit it, and libdispatch keeps such workers for other
/// tests' work, so the test process itself never joins a namespace on any thread.
class ReachabilityNamespaceTestCase: XCTestCase {
    var client: NetworkNamespace!
    var host: NetworkNamespace!

    /// Client side: 198.18.0.2/24 and 2001:db8:18::2/64; host side .1 / ::1 (benchmarking
    /// and documentation ranges; no packet is ever sent to them).
    static let clientAddress = "198.18.0.2"
    static let hostAddress = "198.18.0.1"
    static let clientAddress6 = "2001:db8:18::2"
    static let hostAddress6 = "2001:db8:18::1"
    /// An on-link gateway nothing owns: tests move the default route to it as a marker that
    /// the manager has caught up (see `StatusRecorder.wait(untilPath:)`).
    static let markerGateway = "198.18.0.3"

    /// In the test process: runs this test in a child process and checks afterwards that no
    /// thread of this process ended up in another network namespace. In the child: runs
    /// the test (setUp, body, tearDown) as usual.
    override func invokeTest() {
        let child = ChildProcessTest(self)
        if child.isCurrentProcess { return super.invokeTest() }
        child.runAndReport(in: self)
        do {
            let stray = try NetworkNamespaceAudit.strayThreads()
            XCTAssertEqual(stray, [], "threads of the test process are in another network namespace; "
                           + "their sockets cannot reach this process's 127.0.0.1")
        } catch {
            XCTFail("cannot audit the threads' network namespaces: \(error)")
        }
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        // Failing here (not skipping) is deliberate: without namespaces nothing is tested.
        let client = try NetworkNamespace()
        addTeardownBlock { client.destroy() }
        let host = try NetworkNamespace()
        addTeardownBlock { host.destroy() }
        self.client = client
        self.host = host
    }

    /// Creates the veth pair, brings both ends and the host's loopback up, and addresses
    /// them. No default route yet.
    func connectHost() throws {
        try client.ip("link", "add", "crl0", "type", "veth", "peer", "name", "crl0p", "netns", host.name)
        try client.ip("addr", "add", "\(Self.clientAddress)/24", "dev", "crl0")
        try client.ip("addr", "add", "\(Self.clientAddress6)/64", "dev", "crl0", "nodad")
        try host.ip("addr", "add", "\(Self.hostAddress)/24", "dev", "crl0p")
        try host.ip("addr", "add", "\(Self.hostAddress6)/64", "dev", "crl0p", "nodad")
        try host.ip("link", "set", "lo", "up")
        try host.ip("link", "set", "crl0p", "up")
        try client.ip("link", "set", "crl0", "up")
    }

    func addDefaultRoute() throws {
        try client.ip("route", "add", "default", "via", Self.hostAddress, "dev", "crl0")
    }

    /// Makes a manager and starts it inside the client namespace; stopped in tearDown.
    func startManager(_ make: @escaping @Sendable () -> NetworkReachabilityManager?,
                      configure: (@Sendable (inout MonitorConfiguration) -> Void)? = nil,
                      file: StaticString = #filePath, line: UInt = #line) throws -> (NetworkReachabilityManager, StatusRecorder) {
        let manager = try XCTUnwrap(make(), file: file, line: line)
        if let configure { manager.configuration.withLock { configure(&$0) } }
        let recorder = StatusRecorder(manager)
        try client.perform { manager.startMonitoring() }
        XCTAssertTrue(manager.isMonitoring, "startMonitoring failed: \(String(describing: manager.monitoringError))",
                      file: file, line: line)
        // Teardown blocks run last-registered first: the manager stops before its namespace goes.
        addTeardownBlock { manager.stopMonitoring() }
        return (manager, recorder)
    }

    /// A manager for the default route of both families, like `shared`.
    func startDefaultRouteManager() throws -> (NetworkReachabilityManager, StatusRecorder) {
        try startManager { NetworkReachabilityManager() }
    }

    static func ipv4(_ text: String) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        _ = inet_pton(AF_INET, text, &address.sin_addr)
        return address
    }

    static func ipv6(_ text: String) -> sockaddr_in6 {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        _ = inet_pton(AF_INET6, text, &address.sin6_addr)
        return address
    }
}
