import Glibc
import XCTest
@testable import Reachability

/// The status enum and the parts of the manager that need no kernel.
final class NetworkReachabilityStatusTests: XCTestCase {
    func testFlagsAndDescriptions() {
        let all: [NetworkReachabilityStatus] = [.unknown, .notReachable, .reachableViaWWAN, .reachableViaWiFi, .reachableViaEthernet]
        XCTAssertEqual(all.map(\.isReachable), [false, false, true, true, true])
        XCTAssertEqual(all.map(\.isReachableViaWWAN), [false, false, true, false, false])
        XCTAssertEqual(all.map(\.isReachableViaWiFi), [false, false, false, true, false])
        XCTAssertEqual(all.map(\.localizedDescription),
                       ["Unknown", "Not Reachable", "Reachable via WWAN", "Reachable via WiFi", "Reachable via Ethernet"])
        XCTAssertEqual(Set(all).count, 5)
        XCTAssertEqual("\(NetworkReachabilityStatus.reachableViaWiFi)", "Reachable via WiFi")
    }

    func testInitialStateAndTargets() {
        let manager = NetworkReachabilityManager()
        XCTAssertEqual(manager.networkReachabilityStatus, .unknown)
        XCTAssertFalse(manager.isReachable)
        XCTAssertFalse(manager.isMonitoring)
        XCTAssertNil(manager.networkPath)
        XCTAssertEqual(manager.localizedNetworkReachabilityStatusString, "Unknown")

        var v4 = sockaddr_in()
        v4.sin_family = sa_family_t(AF_INET)
        XCTAssertEqual(NetworkReachabilityManager(address: v4).target, .address(IPAddress(family: 2, bytes: [0, 0, 0, 0])!))
        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        _ = inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr)
        XCTAssertEqual(NetworkReachabilityManager(address: v6).target,
                       .address(IPAddress(family: 10, bytes: [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1])!))
        XCTAssertEqual(NetworkReachabilityManager(interfaceName: "eth0").target, .interface("eth0"))
        XCTAssertEqual(NetworkReachabilityManager(domain: "example.com")?.target, .domain("example.com"))
        XCTAssertNil(NetworkReachabilityManager(domain: ""))
        XCTAssertNil(NetworkReachabilityManager(domain: String(repeating: "a", count: 254)))
        XCTAssertNil(NetworkReachabilityManager(domain: "a\tb"))
        XCTAssertTrue(NetworkReachabilityManager.shared === NetworkReachabilityManager.shared)
    }

    func testStreamEndsWhenManagerGoes() async {
        var manager: NetworkReachabilityManager? = NetworkReachabilityManager()
        let stream = manager?.statusUpdates
        manager = nil
        var count = 0
        if let stream {
            for await _ in stream { count += 1 }
        }
        XCTAssertEqual(count, 0)
    }
}
