/// What a manager watches.
enum ReachabilityTarget: Sendable, Hashable {
    /// The route to "the internet" for these families (IPv4 first): `shared`, `init()` and
    /// the all-zero addresses.
    case defaultRoute(families: [UInt8])
    /// The route to one address.
    case address(IPAddress)
    /// The routes to a host name's addresses, re-resolved when routes change.
    case domain(String)
    /// One interface by name.
    case interface(String)

    /// The address whose route stands for "the default route" of a family. The kernel's
    /// lookup for a global unicast address answers "which route would carry traffic to the
    /// internet", honouring policy rules and split default routes (0.0.0.0/1 + 128.0.0.0/1)
    /// that VPNs install. No packet is ever sent to it.
    static func defaultRouteProbe(family: UInt8) -> IPAddress? {
        switch family {
        case IPAddress.familyIPv4:
            IPAddress(family: family, bytes: [8, 8, 8, 8])
        case IPAddress.familyIPv6:
            IPAddress(family: family, bytes: [0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x88])
        default:
            nil
        }
    }

    /// Whether the host name must be resolved before the target can be evaluated.
    var domain: String? {
        if case .domain(let name) = self { name } else { nil }
    }
}
