import Foundation
import XCTest
@testable import Reachability

/// Interface kinds from netlink facts and a fake sysfs tree.
final class InterfaceClassifierTests: XCTestCase {
    private var root: URL!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-sysfs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let root = self.root!
        addTeardownBlock { try? FileManager.default.removeItem(at: root) }
    }

    private func device(_ name: String, index: Int32, wireless: Bool = false, uevent: String = "") throws {
        let directory = root.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try "\(index)\n".write(to: directory.appendingPathComponent("ifindex"), atomically: true, encoding: .utf8)
        try uevent.write(to: directory.appendingPathComponent("uevent"), atomically: true, encoding: .utf8)
        if wireless {
            try FileManager.default.createDirectory(at: directory.appendingPathComponent("wireless"), withIntermediateDirectories: true)
        }
    }

    private func classify(_ name: String, index: Int32, type: UInt16 = 1, kind: String? = nil,
                          flags: UInt32 = 0x41) -> (InterfaceKind, Bool) {
        let result = InterfaceClassifier(sysfsRoot: root.path)
            .classify(LinkMessage(index: index, name: name, hardwareType: type, flags: flags, kind: kind))
        return (result.kind, result.isTunnel)
    }

    func testKinds() throws {
        try device("wlan0", index: 3, wireless: true, uevent: "DEVTYPE=wlan\nINTERFACE=wlan0\n")
        try device("wwan0", index: 4, uevent: "DEVTYPE=wwan\n")
        try device("eth0", index: 2, uevent: "INTERFACE=eth0\n")
        try device("wlp1s0", index: 9, uevent: "DEVTYPE=wlan\n")

        XCTAssertTrue(classify("wlan0", index: 3) == (.wifi, false))
        XCTAssertTrue(classify("wlp1s0", index: 9) == (.wifi, false))
        XCTAssertTrue(classify("wwan0", index: 4, type: Netlink.hardwareNone) == (.wwan, false))
        XCTAssertTrue(classify("eth0", index: 2) == (.ethernet, false))
        XCTAssertTrue(classify("lo", index: 1, type: Netlink.hardwareLoopback, flags: 0x49) == (.loopback, false))
        XCTAssertTrue(classify("wg0", index: 5, type: Netlink.hardwareNone, kind: "wireguard") == (.other, true))
        XCTAssertTrue(classify("tun0", index: 6, type: Netlink.hardwareNone, kind: "tun") == (.other, true))
        XCTAssertTrue(classify("gre1", index: 7, type: Netlink.hardwareIPGRE) == (.other, true))
        XCTAssertTrue(classify("rmnet0", index: 8, type: Netlink.hardwareRawIP) == (.wwan, false))
        XCTAssertTrue(classify("veth0", index: 10, kind: "veth") == (.ethernet, false))
        XCTAssertTrue(classify("ppp0", index: 11, type: Netlink.hardwarePPP) == (.other, false))
    }

    func testSysfsIsIgnoredForAnotherNamespacesDevice() throws {
        // Same name, different index: sysfs is showing some other namespace's wlan0.
        try device("wlan0", index: 3, wireless: true)
        XCTAssertTrue(classify("wlan0", index: 12) == (.ethernet, false))
        // A software device is never looked up in sysfs.
        XCTAssertTrue(classify("wlan0", index: 3, kind: "veth") == (.ethernet, false))
        // Names that would leave the directory are refused.
        XCTAssertNil(InterfaceClassifier(sysfsRoot: root.path).sysfsKind(name: "../wlan0", index: 3))
        XCTAssertNil(InterfaceClassifier(sysfsRoot: root.path).sysfsKind(name: "..", index: 3))
    }

    func testStatusForKinds() {
        XCTAssertEqual(InterfaceKind.wifi.reachableStatus, .reachableViaWiFi)
        XCTAssertEqual(InterfaceKind.wwan.reachableStatus, .reachableViaWWAN)
        XCTAssertEqual(InterfaceKind.ethernet.reachableStatus, .reachableViaEthernet)
        XCTAssertEqual(InterfaceKind.loopback.reachableStatus, .reachableViaEthernet)
        XCTAssertEqual(InterfaceKind.other.reachableStatus, .reachableViaEthernet)
    }
}
