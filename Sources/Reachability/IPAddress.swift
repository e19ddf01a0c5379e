import Glibc

/// An IPv4 or IPv6 address as raw network-order bytes, the form netlink carries.
struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// AF_INET or AF_INET6.
    let family: UInt8
    /// 4 bytes for IPv4, 16 for IPv6, network byte order.
    let bytes: [UInt8]

    static let familyIPv4 = UInt8(AF_INET)
    static let familyIPv6 = UInt8(AF_INET6)

    /// Accepts only a known family with the matching byte count, so a malformed attribute
    /// can never become an address.
    init?(family: UInt8, bytes: [UInt8]) {
        switch family {
        case Self.familyIPv4 where bytes.count == 4, Self.familyIPv6 where bytes.count == 16:
            self.family = family
            self.bytes = bytes
        default:
            return nil
        }
    }

    /// The address in a `sockaddr_in` (port ignored).
    init(_ address: sockaddr_in) {
        family = Self.familyIPv4
        bytes = withUnsafeBytes(of: address.sin_addr.s_addr) { Array($0) }
    }

    /// The address in a `sockaddr_in6` (port, flow label and scope ignored).
    init(_ address: sockaddr_in6) {
        family = Self.familyIPv6
        bytes = withUnsafeBytes(of: address.sin6_addr) { Array($0) }
    }

    /// 0.0.0.0 or ::, which AFNetworking's API uses to mean "the default route".
    var isUnspecified: Bool { bytes.allSatisfy { $0 == 0 } }

    /// The route lookup's prefix length for a single host.
    var hostPrefixLength: UInt8 { UInt8(bytes.count * 8) }

    /// Textual form from inet_ntop ("192.0.2.1", "2001:db8::1").
    var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let ok = bytes.withUnsafeBytes { raw in
            buffer.withUnsafeMutableBufferPointer { out in
                inet_ntop(Int32(family), raw.baseAddress, out.baseAddress, socklen_t(out.count)) != nil
            }
        }
        guard ok else { return bytes.map(String.init).joined(separator: ".") }
        let end = buffer.firstIndex(of: 0) ?? buffer.endIndex
        return String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
