import Foundation

/// Decides an interface's kind and whether it is a VPN/tunnel.
///
/// Netlink facts come first because they are correct in any network namespace: the ARPHRD
/// type (the number sysfs shows as `type`) and IFLA_INFO_KIND. sysfs is consulted only to
/// tell Wi-Fi and WWAN apart from Ethernet, and only for a device without a software kind
/// whose sysfs `ifindex` matches, because /sys/class/net shows the devices of the namespace
/// that mounted /sys, which need not be the socket's.
struct InterfaceClassifier: Sendable {
    /// Normally /sys/class/net; tests point it at a directory they build.
    var sysfsRoot: String = "/sys/class/net"

    /// Software link kinds that are tunnels, i.e. a VPN or an overlay, not a physical network.
    static let tunnelKinds: Set<String> = [
        "wireguard", "tun", "ipip", "gre", "gretap", "ip6gre", "ip6gretap", "sit", "ip6tnl",
        "vti", "vti6", "xfrm", "geneve", "vxlan", "ipsec", "ovpn", "l2tp", "erspan", "ip6erspan",
    ]

    /// ARPHRD types that only tunnels use.
    static let tunnelHardwareTypes: Set<UInt16> = [
        Netlink.hardwareTunnel, Netlink.hardwareTunnel6, Netlink.hardwareSIT,
        Netlink.hardwareIPGRE, Netlink.hardwareIP6GRE,
    ]

    /// The kind of `link` and whether it is a tunnel.
    func classify(_ link: LinkMessage) -> (kind: InterfaceKind, isTunnel: Bool) {
        if link.hardwareType == Netlink.hardwareLoopback || link.flags & Netlink.interfaceLoopback != 0 {
            return (.loopback, false)
        }
        if let kind = link.kind, Self.tunnelKinds.contains(kind) {
            return (.other, true)
        }
        if Self.tunnelHardwareTypes.contains(link.hardwareType) {
            return (.other, true)
        }
        // Wireless and WWAN drivers register no rtnl_link_ops, so a device with a kind
        // (veth, bridge, vlan, …) is never one of them and needs no sysfs look-up.
        if link.kind == nil, let name = link.name, let sysfsKind = sysfsKind(name: name, index: link.index) {
            return (sysfsKind, false)
        }
        switch link.hardwareType {
        case Netlink.hardwareEthernet:
            return (.ethernet, false)
        case Netlink.hardwareIEEE80211, Netlink.hardwareIEEE80211Prism, Netlink.hardwareIEEE80211Radiotap:
            return (.wifi, false)
        case Netlink.hardwareRawIP:
            return (.wwan, false)
        case Netlink.hardwareNone:
            // A layer-3 device without a kind: tun-like.
            return (.other, true)
        default:
            return (.other, false)
        }
    }

    /// Wi-Fi or WWAN from sysfs, or nil when sysfs says neither or is about another device.
    func sysfsKind(name: String, index: Int32) -> InterfaceKind? {
        // A name with a slash or a dot path would escape the directory.
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else { return nil }
        let directory = sysfsRoot + "/" + name
        guard let indexText = read(directory + "/ifindex"),
              Int32(indexText.trimmingCharacters(in: .whitespacesAndNewlines)) == index
        else { return nil }
        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: directory + "/wireless") || fileManager.fileExists(atPath: directory + "/phy80211") {
            return .wifi
        }
        if let uevent = read(directory + "/uevent") {
            for line in uevent.split(separator: "\n") {
                switch line.trimmingCharacters(in: .whitespaces) {
                case "DEVTYPE=wwan": return .wwan
                case "DEVTYPE=wlan": return .wifi
                default: continue
                }
            }
        }
        return nil
    }

    /// A small sysfs file's text (at most 64 KiB), or nil when it cannot be read.
    private func read(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: 64 * 1024) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
