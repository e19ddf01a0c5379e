/// A decoded RTM_NEWLINK: the facts about one interface that reachability needs.
/// Everything here comes from netlink, so it is correct for the namespace the socket was
/// opened in (unlike sysfs, which shows the namespace that mounted /sys).
struct LinkMessage: Sendable, Equatable {
    /// `ifi_index`.
    var index: Int32
    /// IFLA_IFNAME.
    var name: String?
    /// `ifi_type`, an ARPHRD_* value (the number sysfs shows in /sys/class/net/IF/type).
    var hardwareType: UInt16
    /// `ifi_flags`: IFF_UP, IFF_RUNNING, IFF_LOWER_UP, …
    var flags: UInt32
    /// IFLA_LINKINFO / IFLA_INFO_KIND: "veth", "wireguard", "tun", … (nil for plain hardware).
    var kind: String?

    /// Administratively up and with carrier: packets can leave through it.
    var isUsable: Bool {
        flags & Netlink.interfaceUp != 0 && flags & Netlink.interfaceRunning != 0
    }
}
