// Values from <linux/netlink.h>, <linux/rtnetlink.h>, <linux/if_link.h>, <linux/if_arp.h>
// and <net/if.h>. Glibc's Swift module does not import the Linux UAPI netlink headers, and
// this module has no C shim by design, so the ABI numbers live here. They are part of the
// kernel's stable user-space ABI and never change.

/// Netlink and rtnetlink ABI constants used by the reachability monitor.
enum Netlink {
    static let addressFamily: Int32 = 16          // AF_NETLINK
    static let protocolRoute: Int32 = 0           // NETLINK_ROUTE
    static let socketLevel: Int32 = 270           // SOL_NETLINK
    static let addMembership: Int32 = 1           // NETLINK_ADD_MEMBERSHIP

    // nlmsghdr and rtattr sizes; NLMSG_ALIGNTO and RTA_ALIGNTO are both 4.
    static let headerSize = 16
    static let attributeHeaderSize = 4
    static let alignment = 4

    /// NLMSG_ALIGN / RTA_ALIGN: round up to the next multiple of four.
    static func align(_ length: Int) -> Int { (length + alignment - 1) & ~(alignment - 1) }

    // Message types.
    static let noop: UInt16 = 1                   // NLMSG_NOOP
    static let error: UInt16 = 2                  // NLMSG_ERROR
    static let done: UInt16 = 3                   // NLMSG_DONE
    static let overrun: UInt16 = 4                // NLMSG_OVERRUN
    static let newLink: UInt16 = 16               // RTM_NEWLINK
    static let deleteLink: UInt16 = 17            // RTM_DELLINK
    static let getLink: UInt16 = 18               // RTM_GETLINK
    static let newAddress: UInt16 = 20            // RTM_NEWADDR
    static let deleteAddress: UInt16 = 21         // RTM_DELADDR
    static let newRoute: UInt16 = 24              // RTM_NEWROUTE
    static let deleteRoute: UInt16 = 25           // RTM_DELROUTE
    static let getRoute: UInt16 = 26              // RTM_GETROUTE
    static let newRule: UInt16 = 32               // RTM_NEWRULE
    static let deleteRule: UInt16 = 33            // RTM_DELRULE

    // Header flags.
    static let flagRequest: UInt16 = 0x1          // NLM_F_REQUEST
    static let flagMulti: UInt16 = 0x2            // NLM_F_MULTI
    static let flagDumpInterrupted: UInt16 = 0x10 // NLM_F_DUMP_INTR
    static let flagDump: UInt16 = 0x300           // NLM_F_ROOT | NLM_F_MATCH

    // Multicast groups, as the legacy bit mask given to bind() (RTMGRP_*).
    static let groupLink: UInt32 = 0x1
    static let groupIPv4Address: UInt32 = 0x10
    static let groupIPv4Route: UInt32 = 0x40
    static let groupIPv4Rule: UInt32 = 0x80
    static let groupIPv6Address: UInt32 = 0x100
    static let groupIPv6Route: UInt32 = 0x400
    // Groups above 31 cannot be expressed in the mask; they are joined by number.
    static let groupNumberIPv6Rule: UInt32 = 19   // RTNLGRP_IPV6_RULE
    static let groupNumberNexthop: UInt32 = 32    // RTNLGRP_NEXTHOP

    // Route types (rtm_type).
    static let routeUnicast: UInt8 = 1            // RTN_UNICAST
    static let routeLocal: UInt8 = 2              // RTN_LOCAL
    static let routeBlackhole: UInt8 = 6          // RTN_BLACKHOLE
    static let routeUnreachable: UInt8 = 7        // RTN_UNREACHABLE
    static let routeProhibit: UInt8 = 8           // RTN_PROHIBIT

    // Route attributes (RTA_*).
    static let routeAttributeDestination: UInt16 = 1
    static let routeAttributeOutputInterface: UInt16 = 4
    static let routeAttributeGateway: UInt16 = 5
    static let routeAttributePriority: UInt16 = 6
    static let routeAttributePreferredSource: UInt16 = 7
    static let routeAttributeTable: UInt16 = 15
    static let routeAttributeVia: UInt16 = 18

    // Link attributes (IFLA_*) and the nested IFLA_LINKINFO ones (IFLA_INFO_*).
    static let linkAttributeName: UInt16 = 3
    static let linkAttributeOperationalState: UInt16 = 16
    static let linkAttributeLinkInfo: UInt16 = 18
    static let linkInfoKind: UInt16 = 1

    // Address attributes (IFA_*).
    static let addressAttributeAddress: UInt16 = 1
    static let addressAttributeLocal: UInt16 = 2

    /// Attribute type bits that are flags, not part of the type (NLA_F_NESTED, NLA_F_NET_BYTEORDER).
    static let attributeTypeMask: UInt16 = 0x3FFF

    // Interface flags (IFF_*).
    static let interfaceUp: UInt32 = 0x1
    static let interfaceLoopback: UInt32 = 0x8
    static let interfaceRunning: UInt32 = 0x40
    static let interfaceLowerUp: UInt32 = 0x10000

    // Hardware types (ARPHRD_*), from ifinfomsg.ifi_type (the same number as sysfs `type`).
    static let hardwareEthernet: UInt16 = 1
    static let hardwarePPP: UInt16 = 512
    static let hardwareRawIP: UInt16 = 519
    static let hardwareTunnel: UInt16 = 768
    static let hardwareTunnel6: UInt16 = 769
    static let hardwareLoopback: UInt16 = 772
    static let hardwareSIT: UInt16 = 776
    static let hardwareIPGRE: UInt16 = 778
    static let hardwareIEEE80211: UInt16 = 801
    static let hardwareIEEE80211Prism: UInt16 = 802
    static let hardwareIEEE80211Radiotap: UInt16 = 803
    static let hardwareIP6GRE: UInt16 = 823
    static let hardwareNone: UInt16 = 0xFFFE
}
