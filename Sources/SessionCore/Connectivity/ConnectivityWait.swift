import Foundation
import Glibc
import Reachability
import Synchronization

/// One task's wait for a route to its host (`SessionConfiguration.waitsForConnectivity`):
/// asks Reachability's rtnetlink monitor whether a route is missing and, if so, waits until
/// one appears. Runs in a Swift task of its own, never on the driver thread; the driver
/// cancels it when the task ends another way (cancel, resource timeout).
final class ConnectivityWait: Sendable {
    /// What is watched: the route to an address literal, or (for a host name, whose address
    /// cannot be known without the network) the default route. Which hosts an attempt's
    /// routes lead to (the origin's, its overrides', the proxy's): `ConnectivityWait+Targets`.
    enum Target: Hashable, Sendable {
        case ipv4(String)
        case ipv6(String)
        case defaultRoute

        /// The target for a host (brackets or not). `localhost` and names under `.localhost`
        /// are the loopback address, as libcurl resolves them itself: their failure is never
        /// for want of a default route.
        init(host: String) {
            let host = ProxyBypassList.unbracketed(host)
            let name = host.lowercased()
            if name == "localhost" || name.hasSuffix(".localhost") || name == "localhost." {
                self = .ipv4("127.0.0.1")
                return
            }
            var v4 = in_addr()
            var v6 = in6_addr()
            if inet_pton(AF_INET, host, &v4) == 1 {
                self = .ipv4(host)
            } else if !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == "x" || $0 == "X" }),
                inet_aton(host, &v4) != 0, let text = Self.dotted(v4)
            {
                // The short and numeric IPv4 forms libcurl's URL parser reads as an address
                // (`127.1`, `0x7f.0.0.1`, `2130706433`): taken for a name, a refused loopback
                // request waited for a default route.
                self = .ipv4(text)
            } else if inet_pton(AF_INET6, host, &v6) == 1 {
                self = .ipv6(host)
            } else {
                self = .defaultRoute
            }
        }

        /// `address` as dotted decimal.
        private static func dotted(_ address: in_addr) -> String? {
            var address = address
            var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            guard inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }

        /// A reachability manager for this target (not started).
        fileprivate func makeManager() -> NetworkReachabilityManager {
            switch self {
            case .ipv4(let text):
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                _ = inet_pton(AF_INET, text, &address.sin_addr)
                return NetworkReachabilityManager(address: address)
            case .ipv6(let text):
                var address = sockaddr_in6()
                address.sin6_family = sa_family_t(AF_INET6)
                _ = inet_pton(AF_INET6, text, &address.sin6_addr)
                return NetworkReachabilityManager(address: address)
            case .defaultRoute:
                return NetworkReachabilityManager()
            }
        }
    }

    private let watcher: Task<Void, Never>

    /// Starts finding out (on the driver thread) whether every route in `targets` (not empty)
    /// is missing: an attempt may have gone to any of them (the addresses a host override
    /// gives, the proxies of an http URL HSTS may upgrade), so it waits only while none is
    /// there. `waiting` is called once they are all known to be missing; `decided(true)` when
    /// one appeared, `decided(false)` when one was there (or a routing table cannot be read:
    /// the attempt's error then stands).
    ///
    /// The monitors are started here, on the thread that runs the transfers, so that they read
    /// the routing table of the network namespace their sockets live in (their netlink sockets
    /// and threads are made in the calling thread's namespace); the wait itself runs in a task.
    init(targets: [Target], waiting: @escaping @Sendable () -> Void, decided: @escaping @Sendable (Bool) -> Void) {
        // The watcher runs on a thread of the task pool, which may live in another namespace:
        // it releases by the keys taken here.
        let namespace = Self.currentNetworkNamespace()
        let keys = targets.map { Monitors.Key(namespace: namespace, target: $0) }
        let monitors = keys.map(Monitors.acquire)
        watcher = Task.detached {
            defer { for key in keys { Monitors.release(key) } }
            // Without a working monitor for each route, nothing can be known: the error stands.
            guard !monitors.isEmpty, monitors.allSatisfy({ $0.monitoringError == nil }) else {
                decided(false)
                return
            }
            // Each stream starts with its monitor's first evaluated status (published shortly
            // after it started) and then yields each change; merged here, by monitor.
            let (updates, sink) = AsyncStream<(index: Int, reachable: Bool)>.makeStream()
            await withTaskGroup(of: Void.self) { group in
                for (index, monitor) in monitors.enumerated() {
                    group.addTask {
                        for await status in monitor.statusUpdates { sink.yield((index, status.isReachable)) }
                    }
                }
                var missing = Set<Int>()
                var waited = false
                for await update in updates {
                    if update.reachable {
                        decided(waited)
                        break
                    }
                    missing.insert(update.index)
                    if !waited, missing.count == monitors.count {
                        waited = true
                        waiting()
                    }
                }
                // Decided, or cancelled (the task ended meanwhile, and nobody waits for an
                // answer): the readers of the monitors' streams stop.
                group.cancelAll()
            }
            sink.finish()
        }
    }

    /// Stops waiting.
    func cancel() { watcher.cancel() }

    /// Whether `error` can come from a missing route: a connection that could not be made, a
    /// name that could not be resolved, a connection lost. Only these are checked against the
    /// routing table.
    static func mayBeForWantOfARoute(_ error: SessionError) -> Bool { error.isConnectivityFailure }

    /// The calling thread's network namespace (device and inode of `/proc/thread-self/ns/net`),
    /// or (0, 0) when it cannot be read: one namespace for every caller then.
    static func currentNetworkNamespace() -> Monitors.Namespace {
        var info = stat()
        guard stat("/proc/thread-self/ns/net", &info) == 0 else { return Monitors.Namespace(device: 0, inode: 0) }
        return Monitors.Namespace(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// One running monitor per target and network namespace for the whole process, however
    /// many tasks wait: a thousand waiting tasks share one netlink socket pair, not a
    /// thousand. Per namespace, because a monitor reads the routing table of the namespace it
    /// was started in, and managers whose drivers live in different namespaces see different
    /// routes to the same address.
    /// How many monitors are running (for tests: none once no task waits).
    static var runningMonitorCount: Int { Monitors.count }

    enum Monitors {
        /// A network namespace, as the kernel names it (its nsfs inode).
        struct Namespace: Hashable, Sendable {
            let device: UInt64
            let inode: UInt64
        }

        struct Key: Hashable, Sendable {
            let namespace: Namespace
            let target: Target
        }

        private struct Entry {
            let monitor: NetworkReachabilityManager
            var users: Int
        }

        private static let entries = Mutex<[Key: Entry]>([:])

        static var count: Int { entries.withLock { $0.count } }

        /// On the thread whose namespace `key` names (the driver's).
        static func acquire(_ key: Key) -> NetworkReachabilityManager {
            entries.withLock { entries in
                if var entry = entries[key] {
                    entry.users += 1
                    entries[key] = entry
                    return entry.monitor
                }
                let monitor = key.target.makeManager()
                monitor.startMonitoring()  // its sockets and thread are made in this thread's namespace
                entries[key] = Entry(monitor: monitor, users: 1)
                return monitor
            }
        }

        static func release(_ key: Key) {
            let last = entries.withLock { entries -> NetworkReachabilityManager? in
                guard var entry = entries[key] else { return nil }
                entry.users -= 1
                if entry.users > 0 {
                    entries[key] = entry
                    return nil
                }
                entries[key] = nil
                return entry.monitor
            }
            // Stopping joins the monitor's thread, which may be inside a netlink query
            // (bounded by its query timeout, seconds). The caller is a task of Swift's
            // cooperative pool (the watcher's end), which must not block: the join waits on a
            // dispatch thread instead. The entry is gone already, so a new wait for the same
            // target starts a monitor of its own meanwhile.
            if let last { DispatchQueue.global(qos: .utility).async { last.stopMonitoring() } }
        }
    }
}
