/// A decoded RTM_NEWROUTE, as the kernel answers RTM_GETROUTE for one destination.
struct RouteMessage: Sendable, Equatable {
    /// `rtm_family`: AF_INET or AF_INET6.
    var family: UInt8
    /// `rtm_dst_len`.
    var destinationLength: UInt8
    /// The routing table (RTA_TABLE when present, else `rtm_table`).
    var table: UInt32
    /// `rtm_protocol`.
    var `protocol`: UInt8
    /// `rtm_scope`.
    var scope: UInt8
    /// `rtm_type`: RTN_UNICAST, RTN_LOCAL, RTN_UNREACHABLE, RTN_BLACKHOLE, RTN_PROHIBIT, …
    var type: UInt8
    /// `rtm_flags`.
    var flags: UInt32
    /// RTA_DST.
    var destination: IPAddress?
    /// RTA_GATEWAY (or RTA_VIA for an IPv4 route through an IPv6 next hop).
    var gateway: IPAddress?
    /// RTA_PREFSRC: the source address the kernel would pick.
    var preferredSource: IPAddress?
    /// RTA_OIF.
    var outputInterface: Int32?
    /// RTA_PRIORITY (the metric).
    var priority: UInt32?

    /// Whether traffic to the destination would leave the host (or loop back) rather than
    /// being refused: unreachable, blackhole and prohibit routes are not reachable.
    var carriesTraffic: Bool {
        type == Netlink.routeUnicast || type == Netlink.routeLocal
    }
}
