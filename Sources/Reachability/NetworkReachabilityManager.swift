import Foundation
import Glibc
import Synchronization

extension Notification.Name {
    /// Posted on a manager's callback queue when its status changes. The object is the
    /// manager; `userInfo[NetworkReachabilityManager.statusUserInfoKey]` is the new
    /// `NetworkReachabilityStatus` and `userInfo[NetworkReachabilityManager.pathUserInfoKey]`
    /// the `NetworkPath` (AFNetworking's `AFNetworkingReachabilityDidChangeNotification`).
    public static let networkReachabilityDidChange = Notification.Name("CurlewNetworkingReachabilityDidChange")
}

/// Watches whether the default route, an address, a host name or an interface can carry
/// traffic, from the kernel's own routing state (rtnetlink), and reports changes
/// (AFNetworking's `AFNetworkReachabilityManager`).
///
/// Reachability says a route exists, not that a server answers: never gate a request on it;
/// use it to retry when the network comes back and to explain failures.
public final class NetworkReachabilityManager: Sendable {
    /// A manager for the default route, IPv4 or IPv6 (AFNetworking's `sharedManager`).
    /// Its sockets are opened in the network namespace of the thread that first starts it.
    public static let shared = NetworkReachabilityManager()

    /// The notification posted on every status change; the same as
    /// `Notification.Name.networkReachabilityDidChange`.
    public static let networkReachabilityDidChange = Notification.Name.networkReachabilityDidChange

    /// The `userInfo` key of the new `NetworkReachabilityStatus` in the change notification.
    public static let statusUserInfoKey = "NetworkReachabilityNotificationStatusItem"

    /// The `userInfo` key of the new `NetworkPath` in the change notification.
    public static let pathUserInfoKey = "NetworkReachabilityNotificationPathItem"

    let target: ReachabilityTarget
    let store = ReachabilityStore()
    /// The running monitor, if any, and the last start-up error.
    private let control = Mutex<(monitor: ReachabilityMonitor?, error: (any Error)?)>((nil, nil))
    /// Tunables; tests change them before `startMonitoring()`.
    let configuration: Mutex<MonitorConfiguration>

    init(target: ReachabilityTarget, configuration: MonitorConfiguration = MonitorConfiguration()) {
        self.target = target
        self.configuration = Mutex(configuration)
        store.state.withLock { $0.owner = self }
    }

    /// A new manager for the default route, IPv4 or IPv6 (AFNetworking's `+manager`).
    public convenience init() {
        self.init(target: .defaultRoute(families: [IPAddress.familyIPv4, IPAddress.familyIPv6]))
    }

    /// A manager for a host name. The name is resolved asynchronously once monitoring
    /// starts, and again whenever routes or addresses change; the status is `.unknown` until
    /// the first answer and `.notReachable` while the name does not resolve.
    /// Returns nil for a string that cannot be a host name (empty, too long, whitespace).
    public convenience init?(domain: String) {
        guard DomainResolver.isPlausibleHostName(domain) else { return nil }
        self.init(target: .domain(domain))
    }

    /// A manager for an IPv4 address; 0.0.0.0 means the IPv4 default route.
    public convenience init(address: sockaddr_in) {
        self.init(target: .address(IPAddress(address)))
    }

    /// A manager for an IPv6 address; :: means the IPv6 default route.
    public convenience init(address: sockaddr_in6) {
        self.init(target: .address(IPAddress(address)))
    }

    /// A manager for one interface ("eth0", "wlan0"): reachable while the interface exists,
    /// is up and has carrier; not reachable while it is missing or down.
    public convenience init(interfaceName: String) {
        self.init(target: .interface(interfaceName))
    }

    deinit {
        let monitor = control.withLock { state in
            defer { state.monitor = nil }
            return state.monitor
        }
        monitor?.stop()
        store.finishStreams()
    }

    /// The current status; `.unknown` until monitoring has produced a first answer.
    public var networkReachabilityStatus: NetworkReachabilityStatus {
        store.state.withLock { $0.status }
    }

    /// The details of the current path (interface, gateway, VPN), or nil before the first answer.
    public var networkPath: NetworkPath? {
        store.state.withLock { $0.path }
    }

    /// Whether the target is reachable over any interface.
    public var isReachable: Bool { networkReachabilityStatus.isReachable }

    /// Whether the target is reachable over a cellular interface.
    public var isReachableViaWWAN: Bool { networkReachabilityStatus.isReachableViaWWAN }

    /// Whether the target is reachable over a Wi-Fi interface.
    public var isReachableViaWiFi: Bool { networkReachabilityStatus.isReachableViaWiFi }

    /// The current status as text (AFNetworking's `localizedNetworkReachabilityStatusString`).
    public var localizedNetworkReachabilityStatusString: String {
        networkReachabilityStatus.localizedDescription
    }

    /// Whether monitoring is running.
    public var isMonitoring: Bool {
        control.withLock { $0.monitor != nil }
    }

    /// Why the last `startMonitoring()` could not open its netlink sockets, or nil.
    public var monitoringError: (any Error)? {
        control.withLock { $0.error }
    }

    /// Starts (or restarts) monitoring: opens the netlink sockets in the calling thread's
    /// network namespace, reads the kernel's state, and reports the first status at once.
    /// When the sockets cannot be opened the status stays `.unknown` and `monitoringError`
    /// says why.
    public func startMonitoring() {
        // The whole restart happens under the lock so that concurrent starts and stops
        // leave exactly one monitor, and it is the one whose generation the store accepts.
        // The monitor thread never takes this lock, so waiting for it here cannot deadlock.
        control.withLock { state in
            state.monitor?.stop()
            state.monitor = nil
            let generation = store.nextGeneration()
            let configuration = self.configuration.withLock { $0 }
            do {
                state.monitor = try ReachabilityMonitor.start(target: target, configuration: configuration,
                                                              store: store, generation: generation)
                state.error = nil
            } catch {
                state.error = error
            }
        }
    }

    /// Stops monitoring and closes the netlink sockets. The last status is kept.
    public func stopMonitoring() {
        control.withLock { state in
            guard let monitor = state.monitor else { return }
            state.monitor = nil
            // A new generation first, so nothing the stopping monitor still evaluates is published.
            _ = store.nextGeneration()
            monitor.stop()
        }
    }

    /// Sets the block called on every status change (once per change, on the manager's
    /// serial callback queue), or removes it with nil.
    public func setReachabilityStatusChangeBlock(_ block: (@Sendable (NetworkReachabilityStatus) -> Void)?) {
        store.state.withLock { $0.block = block }
    }

    /// A stream of status changes. Each access returns a new stream that starts with the
    /// current status (when known) and then yields every change once; it finishes when the
    /// manager is deallocated.
    public var statusUpdates: AsyncStream<NetworkReachabilityStatus> {
        store.makeStream()
    }

    /// Test access to the running monitor.
    var monitor: ReachabilityMonitor? {
        control.withLock { $0.monitor }
    }
}
