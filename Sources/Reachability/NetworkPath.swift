/// The details behind a reachability status: which interface and next hop the kernel
/// would use, and whether that interface is a VPN or tunnel.
public struct NetworkPath: Sendable, Hashable {
    /// The status this path gives.
    public var status: NetworkReachabilityStatus
    /// The outgoing interface's name (nil when not reachable).
    public var interfaceName: String?
    /// The outgoing interface's index (nil when not reachable).
    public var interfaceIndex: Int?
    /// The outgoing interface's kind (nil when not reachable).
    public var interfaceKind: InterfaceKind?
    /// The next hop ("192.0.2.1", "fe80::1"), or nil for a directly connected destination.
    public var gateway: String?
    /// The source address the kernel would choose, when it said.
    public var sourceAddress: String?
    /// The destination that was looked up ("8.8.8.8" for the IPv4 default route), or nil
    /// for an interface-name manager or an unresolved domain.
    public var destination: String?
    /// Whether the outgoing interface is a VPN or another tunnel (WireGuard, tun, GRE, …).
    public var isVPN: Bool

    /// Creates a path; every detail but the status is optional.
    public init(status: NetworkReachabilityStatus, interfaceName: String? = nil, interfaceIndex: Int? = nil,
                interfaceKind: InterfaceKind? = nil, gateway: String? = nil, sourceAddress: String? = nil,
                destination: String? = nil, isVPN: Bool = false) {
        self.status = status
        self.interfaceName = interfaceName
        self.interfaceIndex = interfaceIndex
        self.interfaceKind = interfaceKind
        self.gateway = gateway
        self.sourceAddress = sourceAddress
        self.destination = destination
        self.isVPN = isVPN
    }
}
