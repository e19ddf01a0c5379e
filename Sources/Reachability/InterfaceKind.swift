/// What kind of network interface carries a path.
public enum InterfaceKind: String, Sendable, Hashable, CaseIterable {
    /// An 802.11 wireless interface (sysfs `wireless` or `phy80211`, or DEVTYPE=wlan).
    case wifi
    /// A cellular modem (uevent DEVTYPE=wwan, or a raw-IP device such as rmnet).
    case wwan
    /// An Ethernet-type link (ARPHRD_ETHER): wired NICs, and also veth, bridges, VLANs, bonds.
    case ethernet
    /// The loopback interface.
    case loopback
    /// Anything else: tunnels (WireGuard, tun, GRE, …), PPP, InfiniBand, …
    case other

    /// The reachability status a usable path over this kind of interface reports.
    /// Only Wi-Fi and WWAN have statuses of their own; every other kind, loopback and
    /// tunnels included, reports `.reachableViaEthernet` (`NetworkPath` keeps the precise kind).
    public var reachableStatus: NetworkReachabilityStatus {
        switch self {
        case .wifi: .reachableViaWiFi
        case .wwan: .reachableViaWWAN
        case .ethernet, .loopback, .other: .reachableViaEthernet
        }
    }
}
