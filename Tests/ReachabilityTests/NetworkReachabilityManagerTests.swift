import Foundation
import Glibc
import Synchronization
import XCTest
@testable import Reachability

/// Reachability against the real kernel, inside namespaces made by each test.
final class NetworkReachabilityManagerTests: ReachabilityNamespaceTestCase {
    func testOnlyLoopbackIsNotReachable() throws {
        let (manager, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .notReachable), "got \(recorder.received)")
        XCTAssertFalse(manager.isReachable)
        // With loopback up there is still no route to the internet.
        try client.ip("link", "set", "lo", "up")
        recorder.settle(0.5)
        XCTAssertEqual(manager.networkReachabilityStatus, .notReachable)
        XCTAssertEqual(recorder.received, [.notReachable])
    }

    func testDefaultRouteMakesReachablePromptlyAndFiresOnce() throws {
        try connectHost()
        let (manager, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .notReachable))

        let start = Date()
        try addDefaultRoute()
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "got \(recorder.received)")
        let latency = (recorder.lastTime(of: .reachableViaEthernet) ?? Date()).timeIntervalSince(start)
        // The target is 1 s (a 0.5 s debounce cap plus one evaluation); the log shows the
        // measurement. The assertion only rules out a report that waits for something other
        // than the route's own event: a loaded 2-core CI box cannot promise the 1 s itself.
        print("reachability: default route → reachable in \(Int(latency * 1000)) ms (target 1,000 ms)")
        XCTAssertLessThan(latency, 10, "the change reaches the block when the kernel reports it")

        recorder.settle(0.7)
        XCTAssertEqual(recorder.received, [.notReachable, .reachableViaEthernet], "the block fires once per change")
        XCTAssertTrue(manager.isReachable)
        XCTAssertFalse(manager.isReachableViaWWAN)
        XCTAssertFalse(manager.isReachableViaWiFi)
        let path = try XCTUnwrap(manager.networkPath)
        XCTAssertEqual(path.interfaceName, "crl0")
        XCTAssertEqual(path.interfaceKind, .ethernet)
        XCTAssertEqual(path.gateway, Self.hostAddress)
        XCTAssertEqual(path.sourceAddress, Self.clientAddress)
        XCTAssertFalse(path.isVPN)
    }

    func testRemovingDefaultRouteMakesNotReachable() throws {
        try connectHost()
        try addDefaultRoute()
        let (manager, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        try client.ip("route", "del", "default")
        XCTAssertTrue(recorder.wait(for: .notReachable), "got \(recorder.received)")
        XCTAssertNil(manager.networkPath?.interfaceName)
        XCTAssertEqual(recorder.received, [.reachableViaEthernet, .notReachable])
    }

    func testIPv6DefaultRouteAlone() throws {
        try connectHost()
        let (_, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .notReachable))
        try client.ip("-6", "route", "add", "default", "via", Self.hostAddress6, "dev", "crl0")
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "got \(recorder.received)")
        // An IPv4-only manager (0.0.0.0) does not count the IPv6 default route.
        let (v4Manager, v4Recorder) = try startManager { NetworkReachabilityManager(address: sockaddr_in()) }
        XCTAssertTrue(v4Recorder.wait(for: .notReachable))
        XCTAssertFalse(v4Manager.isReachable)
    }

    func testCarrierFlapsAndAdministrativeDown() throws {
        try connectHost()
        try addDefaultRoute()
        let (_, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        // Carrier flaps: the host side goes down and up; the client's routes stay.
        for _ in 0 ..< 3 {
            try host.ip("link", "set", "crl0p", "down")
            XCTAssertTrue(recorder.wait(for: .notReachable), "got \(recorder.received)")
            try host.ip("link", "set", "crl0p", "up")
            XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "got \(recorder.received)")
        }
        // Administrative down removes the routes through the link; up alone does not bring
        // the default route back.
        try client.ip("link", "set", "crl0", "down")
        XCTAssertTrue(recorder.wait(for: .notReachable))
        try client.ip("link", "set", "crl0", "up")
        recorder.settle(0.5)
        XCTAssertEqual(recorder.received.last, .notReachable)
        try addDefaultRoute()
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        // Every change was reported exactly once: the first status, three flaps (six
        // changes), administrative down and the route's return; statuses alternate.
        let received = recorder.received
        XCTAssertEqual(received.count, 9, "\(received)")
        XCTAssertTrue(zip(received, received.dropFirst()).allSatisfy { $0 != $1 }, "\(received)")
    }

    func testRapidFlapsAreDebouncedAndSettleCorrectly() throws {
        try connectHost()
        try addDefaultRoute()
        let (_, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        // 50 down/up pairs in one burst, ending up: flaps inside the debounce window are
        // absorbed, and whatever is reported ends with the true state.
        try host.batch(Array(repeating: ["link set crl0p down", "link set crl0p up"], count: 50).flatMap { $0 })
        // A marker after the storm that only the path shows: once the manager reports the new
        // gateway it has evaluated past every flap, however slowly the machine ran.
        try client.ip("route", "replace", "default", "via", Self.markerGateway, "dev", "crl0")
        XCTAssertTrue(recorder.wait(untilPath: { $0.gateway == Self.markerGateway }), "\(recorder.received)")
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        recorder.settle(0.7)
        let received = recorder.received
        print("reachability: 100 flaps → \(received.count - 1) reported changes")
        XCTAssertEqual(received.last, .reachableViaEthernet)
        XCTAssertLessThanOrEqual(received.count, 1 + 2 * 10, "debouncing should absorb most flaps: \(received)")
        XCTAssertTrue(zip(received, received.dropFirst()).allSatisfy { $0 != $1 }, "\(received)")
    }

    func testAddressManagerFollowsItsOwnRouteWithoutDefaultRoute() throws {
        try connectHost()
        try client.ip("route", "add", "198.51.100.0/24", "via", Self.hostAddress)
        try client.ip("-6", "route", "add", "2001:db8:51::/48", "via", Self.hostAddress6)
        let (defaultManager, defaultRecorder) = try startDefaultRouteManager()
        let (routed, routedRecorder) = try startManager { NetworkReachabilityManager(address: Self.ipv4("198.51.100.7")) }
        let (routed6, routed6Recorder) = try startManager { NetworkReachabilityManager(address: Self.ipv6("2001:db8:51::7")) }
        let (other, otherRecorder) = try startManager { NetworkReachabilityManager(address: Self.ipv4("203.0.113.5")) }
        let (onLink, onLinkRecorder) = try startManager { NetworkReachabilityManager(address: Self.ipv4(Self.hostAddress)) }

        XCTAssertTrue(defaultRecorder.wait(for: .notReachable))
        XCTAssertTrue(routedRecorder.wait(for: .reachableViaEthernet), "got \(routedRecorder.received)")
        XCTAssertTrue(routed6Recorder.wait(for: .reachableViaEthernet), "got \(routed6Recorder.received)")
        XCTAssertTrue(otherRecorder.wait(for: .notReachable))
        XCTAssertTrue(onLinkRecorder.wait(for: .reachableViaEthernet))
        XCTAssertFalse(defaultManager.isReachable)
        XCTAssertEqual(routed.networkPath?.gateway, Self.hostAddress)
        XCTAssertEqual(routed6.networkPath?.gateway, Self.hostAddress6)
        XCTAssertEqual(routed.networkPath?.destination, "198.51.100.7")
        XCTAssertNil(onLink.networkPath?.gateway, "a directly connected destination has no gateway")
        XCTAssertFalse(other.isReachable)

        try client.ip("route", "del", "198.51.100.0/24")
        XCTAssertTrue(routedRecorder.wait(for: .notReachable))
    }

    func testUnreachableBlackholeAndProhibitRoutesAreNotReachable() throws {
        try connectHost()
        try addDefaultRoute()
        let (manager, recorder) = try startManager { NetworkReachabilityManager(address: Self.ipv4("198.51.100.7")) }
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        for type in ["unreachable", "blackhole", "prohibit"] {
            try client.ip("route", "add", type, "198.51.100.0/24")
            XCTAssertTrue(recorder.wait(for: .notReachable), "\(type): got \(recorder.received)")
            XCTAssertFalse(manager.isReachable, type)
            try client.ip("route", "del", type, "198.51.100.0/24")
            XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "\(type): got \(recorder.received)")
        }
        // A more specific unreachable route inside a policy-routing table chosen by a rule.
        try client.ip("route", "add", "unreachable", "198.51.100.0/24", "table", "100")
        try client.ip("rule", "add", "to", "198.51.100.0/24", "lookup", "100", "priority", "100")
        XCTAssertTrue(recorder.wait(for: .notReachable), "policy rule: got \(recorder.received)")
        try client.ip("rule", "del", "priority", "100")
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "policy rule removed: got \(recorder.received)")
    }

    func testInterfaceNameManager() throws {
        let (manager, recorder) = try startManager { NetworkReachabilityManager(interfaceName: "crl0") }
        XCTAssertTrue(recorder.wait(for: .notReachable), "missing interface")
        try client.ip("link", "add", "crl0", "type", "veth", "peer", "name", "crl0p", "netns", host.name)
        recorder.settle(0.4)
        XCTAssertEqual(manager.networkReachabilityStatus, .notReachable, "interface down")
        try client.ip("link", "set", "crl0", "up")
        try host.ip("link", "set", "crl0p", "up")
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "got \(recorder.received)")
        XCTAssertEqual(manager.networkPath?.interfaceName, "crl0")
        try client.ip("link", "set", "crl0", "down")
        XCTAssertTrue(recorder.wait(for: .notReachable))
        try client.ip("link", "set", "crl0", "up")
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        try client.ip("link", "del", "crl0")
        XCTAssertTrue(recorder.wait(for: .notReachable))

        let (loopback, loopbackRecorder) = try startManager { NetworkReachabilityManager(interfaceName: "lo") }
        XCTAssertTrue(loopbackRecorder.wait(for: .notReachable))
        try client.ip("link", "set", "lo", "up")
        XCTAssertTrue(loopbackRecorder.wait(for: .reachableViaEthernet))
        XCTAssertEqual(loopback.networkPath?.interfaceKind, .loopback)
    }

    func testHostNamespaceGoingAwayMakesNotReachable() throws {
        try connectHost()
        try addDefaultRoute()
        let (_, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        // Deleting the host's end deletes the pair: crl0 disappears from the client.
        try host.ip("link", "del", "crl0p")
        XCTAssertTrue(recorder.wait(for: .notReachable), "got \(recorder.received)")
    }

    func testDomainManagerResolvesLocalhost() throws {
        XCTAssertNil(NetworkReachabilityManager(domain: ""))
        XCTAssertNil(NetworkReachabilityManager(domain: "bad host"))
        let (manager, recorder) = try startManager { NetworkReachabilityManager(domain: "localhost") }
        // Loopback is down in a new namespace: the name resolves, but its route does not exist.
        XCTAssertTrue(recorder.wait(for: .notReachable), "got \(recorder.received)")
        try client.ip("link", "set", "lo", "up")
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "got \(recorder.received)")
        XCTAssertEqual(manager.networkPath?.interfaceKind, .loopback)
        XCTAssertEqual(manager.networkPath?.interfaceName, "lo")

        let (_, unknownRecorder) = try startManager { NetworkReachabilityManager(domain: "no-such-host.invalid") }
        XCTAssertTrue(unknownRecorder.wait(for: .notReachable), "got \(unknownRecorder.received)")
    }

    func testStatusUpdatesStreamAndNotification() async throws {
        try connectHost()
        let (manager, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .notReachable))

        let notified = expectation(forNotification: .networkReachabilityDidChange, object: manager) { notification in
            notification.userInfo?[NetworkReachabilityManager.statusUserInfoKey] as? NetworkReachabilityStatus
                == .reachableViaEthernet
                && (notification.userInfo?[NetworkReachabilityManager.pathUserInfoKey] as? NetworkPath)?.interfaceName == "crl0"
        }
        let stream = manager.statusUpdates
        try addDefaultRoute()
        var seen: [NetworkReachabilityStatus] = []
        for await status in stream {
            seen.append(status)
            if status == .reachableViaEthernet || seen.count >= 5 { break }
        }
        XCTAssertEqual(seen, [.notReachable, .reachableViaEthernet])
        await fulfillment(of: [notified], timeout: 30)
    }

    func testStopMonitoringClosesSocketsAndRestarts() throws {
        try connectHost()
        try addDefaultRoute()
        let before = Self.openDescriptorCount()
        let manager = NetworkReachabilityManager()
        let recorder = StatusRecorder(manager)
        for _ in 0 ..< 50 {
            try client.perform { manager.startMonitoring() }
            XCTAssertTrue(manager.isMonitoring)
            XCTAssertEqual(try userNetlinkSockets(), 2, "an event socket and a request socket")
            manager.stopMonitoring()
            XCTAssertFalse(manager.isMonitoring)
            XCTAssertEqual(try userNetlinkSockets(), 0, "stopMonitoring closes the sockets")
        }
        // Other tests' leftovers may open or close a few descriptors meanwhile; a leak here
        // would be 3 per cycle, 150 in all.
        let leaked = Self.openDescriptorCount() - before
        print("reachability: 50 start/stop cycles, descriptor count change \(leaked)")
        XCTAssertLessThan(leaked, 10, "stopMonitoring closes every descriptor")

        try client.perform { manager.startMonitoring() }
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        manager.stopMonitoring()
        XCTAssertEqual(manager.networkReachabilityStatus, .reachableViaEthernet, "the last status is kept")

        // deinit stops and closes too.
        var temporary: NetworkReachabilityManager? = NetworkReachabilityManager()
        try client.perform { [temporary] in temporary?.startMonitoring() }
        XCTAssertEqual(try userNetlinkSockets(), 2)
        temporary = nil
        // The closure handed to `perform` held the manager too, and the thread that ran it may
        // release it a moment after `perform` returned: wait (bounded, a hang guard) for the
        // last reference to go before counting.
        for _ in 0 ..< 500 where try userNetlinkSockets() != 0 { usleep(10_000) }
        XCTAssertEqual(try userNetlinkSockets(), 0, "deinit closes the sockets")
    }

    func testConcurrentStartsLeaveOneWorkingMonitor() throws {
        try connectHost()
        try addDefaultRoute()
        let manager = NetworkReachabilityManager()
        let recorder = StatusRecorder(manager)
        addTeardownBlock { manager.stopMonitoring() }
        let client = self.client!
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            _ = try? client.perform {
                if index % 3 == 2 { manager.stopMonitoring() }
                manager.startMonitoring()
            }
        }
        XCTAssertTrue(manager.isMonitoring)
        XCTAssertEqual(try userNetlinkSockets(), 2, "exactly one monitor survives")
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "got \(recorder.received)")
        try client.ip("route", "del", "default")
        XCTAssertTrue(recorder.wait(for: .notReachable), "the surviving monitor publishes")
    }

    /// Netlink route sockets of user processes in the client namespace (the kernel's own,
    /// port id 0, excluded). /proc/thread-self/net shows the reading thread's namespace.
    private func userNetlinkSockets() throws -> Int {
        try client.perform {
            let text = try String(contentsOfFile: "/proc/thread-self/net/netlink", encoding: .utf8)
            // Columns: sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode.
            return text.split(separator: "\n").dropFirst().filter { line in
                let columns = line.split(separator: " ")
                return columns.count > 2 && columns[1] == "0" && columns[2] != "0"
            }.count
        }
    }

    func testIdleMonitorUsesNoCPU() throws {
        try connectHost()
        try addDefaultRoute()
        let (manager, recorder) = try startDefaultRouteManager()
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        recorder.settle(0.3)
        let taskID = try XCTUnwrap(manager.monitor?.state.withLock { $0.taskID })
        let threadBefore = try Self.threadCPUTicks(taskID)
        let before = Self.processCPUTime()
        recorder.settle(2)
        let threadTicks = try Self.threadCPUTicks(taskID) - threadBefore
        let used = Self.processCPUTime() - before
        print("reachability: idle 2 s: monitor thread \(threadTicks) clock ticks, "
              + "whole process \(String(format: "%.1f", used * 1000)) ms CPU")
        XCTAssertLessThanOrEqual(threadTicks, 1, "an idle monitor must block, not poll")
    }

    func testThousandRouteChangesWithOverflowRecoverByRedump() throws {
        try connectHost()
        try addDefaultRoute()
        // The smallest receive buffer the kernel allows, and the reader paused while the
        // storm runs, as behind a stalled consumer: the kernel must drop messages.
        let (manager, recorder) = try startManager({ NetworkReachabilityManager() }, configure: { $0.eventBufferSize = 1 })
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet))
        let monitor = try XCTUnwrap(manager.monitor)
        let resyncsBefore = monitor.state.withLock { $0.resynchronizations }
        monitor.setEventsPaused(true)
        var lines: [String] = []
        for index in 0 ..< 499 {
            lines.append("route add 198.19.\(index / 250).\(index % 250)/32 via \(Self.hostAddress)")
        }
        for index in 0 ..< 499 {
            lines.append("route del 198.19.\(index / 250).\(index % 250)/32")
        }
        lines.append("route del default")
        lines.append("link set crl0 mtu 1400") // the last of 1,000 changes
        try client.batch(lines)
        let start = Date()
        monitor.setEventsPaused(false)
        XCTAssertTrue(recorder.wait(for: .notReachable), "got \(recorder.received)")
        let recovery = Date().timeIntervalSince(start)
        let (overruns, resyncs) = monitor.state.withLock { ($0.overruns, $0.resynchronizations) }
        print("reachability: 1,000 changes while paused → \(overruns) ENOBUFS, \(resyncs - resyncsBefore) re-dumps, "
              + "correct status \(Int(recovery * 1000)) ms after resuming")
        XCTAssertGreaterThanOrEqual(overruns, 1, "the tiny buffer must overflow")
        XCTAssertGreaterThanOrEqual(resyncs - resyncsBefore, 1, "an overflow is answered by a re-dump")
        XCTAssertEqual(manager.networkReachabilityStatus, .notReachable)
    }

    func testThousandRouteChangesWithLiveReader() throws {
        try connectHost()
        let (manager, recorder) = try startManager({ NetworkReachabilityManager() }, configure: { $0.eventBufferSize = 1 })
        XCTAssertTrue(recorder.wait(for: .notReachable))
        var lines: [String] = []
        for index in 0 ..< 500 {
            lines.append(index % 2 == 0 ? "route add default via \(Self.hostAddress)" : "route del default")
        }
        for index in 0 ..< 499 {
            lines.append("route add 198.19.\(index / 250).\(index % 250)/32 via \(Self.hostAddress)")
        }
        // The last of 1,000 changes adds the default route through another gateway, a marker
        // the path shows only once the monitor has caught up with the whole storm.
        lines.append("route add default via \(Self.markerGateway)")
        try client.batch(lines)
        XCTAssertTrue(recorder.wait(untilPath: { $0.gateway == Self.markerGateway }), "got \(recorder.received)")
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "got \(recorder.received)")
        recorder.settle(0.7)
        XCTAssertEqual(manager.networkReachabilityStatus, .reachableViaEthernet)
        let received = recorder.received
        XCTAssertTrue(zip(received, received.dropFirst()).allSatisfy { $0 != $1 }, "\(received)")
        let overruns = manager.monitor?.state.withLock { $0.overruns } ?? -1
        print("reachability: 1,000 live changes → \(received.count) reported statuses, \(overruns) ENOBUFS")
    }

    // MARK: - Measurements

    static func openDescriptorCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }

    /// utime + stime of one thread, in clock ticks (fields 14 and 15 of its stat file).
    static func threadCPUTicks(_ taskID: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/self/task/\(taskID)/stat", encoding: .utf8)
        // The command name (field 2) may contain spaces; fields after it follow the last ')'.
        guard let close = stat.lastIndex(of: ")") else { return -1 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return -1 }
        return user + system
    }

    static func processCPUTime() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}
