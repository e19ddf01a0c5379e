import Foundation

/// A host override, local endpoint or DNS server that cannot be handed to libcurl, thrown
/// where the value is made (``HostOverride``, ``LocalEndpoint``, ``DNSServer``), so a bad
/// value never reaches a transfer.
public enum NetworkSettingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not a host name libcurl can match: empty, longer than 253 bytes, or with a character
    /// outside letters, digits, `-`, `_` and `.` (a `:` or `,` would change the meaning of
    /// libcurl's option strings).
    case invalidHostName(String)
    /// A port outside 1...65535.
    case invalidPort(Int)
    /// Not an IPv4 or IPv6 address literal.
    case invalidAddress(String)
    /// An override that names no address.
    case noAddresses(host: String)
    /// Not a network interface name (1 to 15 bytes, no `/`, `!`, `:`, white space or
    /// control characters).
    case invalidInterfaceName(String)

    /// A one-line description naming the value.
    public var description: String {
        switch self {
        case .invalidHostName(let host): return "'\(host)' is not a host name"
        case .invalidPort(let port): return "\(port) is not a port (1...65535)"
        case .invalidAddress(let address): return "'\(address)' is not an IPv4 or IPv6 address"
        case .noAddresses(let host): return "the override for '\(host)' names no address"
        case .invalidInterfaceName(let name): return "'\(name)' is not a network interface name"
        }
    }

    // MARK: - Checks shared by the settings

    static func checkHostName(_ host: String) throws(NetworkSettingError) {
        let allowed = host.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x2E || byte == 0x5F
        }
        guard !host.isEmpty, host.utf8.count <= 253, allowed, !host.hasPrefix("."), !host.hasPrefix("-")
        else { throw .invalidHostName(host) }
    }

    static func checkPort(_ port: Int) throws(NetworkSettingError) {
        guard (1...65535).contains(port) else { throw .invalidPort(port) }
    }

    /// The address as libcurl's option strings write it: IPv6 in brackets. Accepts IPv6 with
    /// or without brackets; throws for anything that is not an address literal.
    static func bracketedAddress(_ address: String) throws(NetworkSettingError) -> String {
        var bare = address
        if bare.hasPrefix("[") && bare.hasSuffix("]") && bare.count > 2 { bare = String(bare.dropFirst().dropLast()) }
        switch IPAddressLiteral.family(of: bare) {
        case .v4: return bare
        case .v6: return "[" + bare + "]"
        case nil: throw .invalidAddress(address)
        }
    }
}
