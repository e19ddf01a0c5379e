import Glibc

/// Turns the kernel's state into a `NetworkPath` for a target. Keeps the link table
/// (from a full dump, then from RTM_NEWLINK/RTM_DELLINK events) and asks the kernel for
/// each destination's route at evaluation time, so routes need no user-space copy that
/// could drift. Confined to the monitor thread.
final class PathEvaluator {
    private let client: RtnetlinkClient
    private let classifier: InterfaceClassifier
    /// Links by index, as last dumped or announced.
    private(set) var links: [Int32: LinkMessage] = [:]

    /// errno values with which RTM_GETROUTE says "no usable route": no route at all, an
    /// `unreachable` route (EHOSTUNREACH), a `prohibit` route (EACCES), a `throw` route or
    /// an address the family cannot route; and a family the kernel does not route at all
    /// (booted with `ipv6.disable=1`, the IPv6 lookup answers EOPNOTSUPP: taken for a broken
    /// socket, it threw away every evaluation, and no status was ever published while IPv4
    /// was down).
    static let noRouteErrors: Set<Int32> = [
        ENETUNREACH, EHOSTUNREACH, EACCES, EPERM, EINVAL, ENODEV, ESRCH, EOPNOTSUPP, EAFNOSUPPORT, EPROTONOSUPPORT,
    ]

    init(client: RtnetlinkClient, classifier: InterfaceClassifier) {
        self.client = client
        self.classifier = classifier
    }

    /// Replaces the link table with a full dump (at start and after an overrun).
    func resynchronize() throws {
        var table: [Int32: LinkMessage] = [:]
        for link in try client.dumpLinks() { table[link.index] = link }
        links = table
    }

    /// Applies one event to the link table; returns whether it may change routing
    /// (routes, addresses, rules), which is when a domain is worth resolving again.
    func apply(_ message: NetlinkMessage) throws -> Bool {
        // A bridge port's notifications (`ifi_family` AF_BRIDGE, an RTM_DELLINK among them when
        // a port leaves its bridge) are about the port's bridge role, not the device: taken for
        // the device, they dropped it from the table or replaced it without its kind.
        if message.type == Netlink.newLink || message.type == Netlink.deleteLink,
            let family = message.payload.first, family != UInt8(AF_UNSPEC)
        {
            return false
        }
        switch message.type {
        case Netlink.newLink:
            let link = try NetlinkMessageParser.link(from: message)
            // A notification may omit IFLA_IFNAME; keep the name we knew.
            var merged = link
            if merged.name == nil { merged.name = links[link.index]?.name }
            links[link.index] = merged
            return false
        case Netlink.deleteLink:
            links[try NetlinkMessageParser.link(from: message).index] = nil
            return true
        default:
            return true
        }
    }

    /// The path for `target`; nil while a domain has not been resolved yet.
    func path(for target: ReachabilityTarget, resolved: [IPAddress]?) throws -> NetworkPath? {
        switch target {
        case .defaultRoute(let families):
            return try bestPath(to: families.compactMap(ReachabilityTarget.defaultRouteProbe(family:)))
        case .address(let address):
            if address.isUnspecified {
                return try bestPath(to: [ReachabilityTarget.defaultRouteProbe(family: address.family)].compactMap { $0 })
            }
            return try bestPath(to: [address])
        case .domain:
            guard let resolved else { return nil }
            return try bestPath(to: resolved)
        case .interface(let name):
            guard let link = links.values.first(where: { $0.name == name }), link.isUsable else {
                return NetworkPath(status: .notReachable)
            }
            return path(over: link, route: nil, destination: nil)
        }
    }

    /// The first reachable destination's path, else the first one's "not reachable" path.
    private func bestPath(to destinations: [IPAddress]) throws -> NetworkPath {
        var first: NetworkPath?
        for destination in destinations {
            let candidate = try path(to: destination)
            if candidate.status.isReachable { return candidate }
            if first == nil { first = candidate }
        }
        return first ?? NetworkPath(status: .notReachable)
    }

    /// The kernel's route to one destination, judged by its type and its interface's state.
    private func path(to destination: IPAddress) throws -> NetworkPath {
        let unreachable = NetworkPath(status: .notReachable, destination: destination.description)
        let route: RouteMessage?
        do {
            route = try client.route(to: destination)
        } catch let error as NetlinkSocketError where error.operation == "rtnetlink" && Self.noRouteErrors.contains(error.code) {
            return unreachable
        }
        guard let route, route.carriesTraffic, let index = route.outputInterface else { return unreachable }
        var link = links[index]
        if link == nil, let fetched = try client.link(index: index) {
            // The route names a link whose announcement has not been read yet.
            links[index] = fetched
            link = fetched
        }
        guard let link, link.isUsable else { return unreachable }
        return path(over: link, route: route, destination: destination)
    }

    private func path(over link: LinkMessage, route: RouteMessage?, destination: IPAddress?) -> NetworkPath {
        let (kind, isTunnel) = classifier.classify(link)
        return NetworkPath(status: kind.reachableStatus, interfaceName: link.name, interfaceIndex: Int(link.index),
                           interfaceKind: kind, gateway: route?.gateway?.description,
                           sourceAddress: route?.preferredSource?.description,
                           destination: destination?.description, isVPN: isTunnel)
    }
}
