import Foundation

/// The local side connections are made from (``SessionConfiguration/localEndpoint``,
/// `CURLOPT_INTERFACE`): a network interface or one of this machine's addresses. A transfer
/// whose socket cannot be bound that way fails with `SessionError.cannotConnect`.
public struct LocalEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The value given to libcurl: `if!name` or `host!address`, so libcurl never has to
    /// guess whether a string is an interface or a host.
    let curlValue: String

    /// Binds to the network interface `name` (`lo`, `eth0`): connections leave through it,
    /// from its address.
    /// - Throws: ``NetworkSettingError/invalidInterfaceName(_:)`` for an impossible name.
    public static func interface(_ name: String) throws(NetworkSettingError) -> LocalEndpoint {
        // Linux: at most IFNAMSIZ - 1 bytes; '/' and white space are never part of one, and
        // '!' would be read as libcurl's prefix separator.
        let valid = name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x2F && $0 != 0x21 && $0 != 0x3A }
        guard !name.isEmpty, name.utf8.count <= 15, valid else { throw .invalidInterfaceName(name) }
        return LocalEndpoint(curlValue: "if!" + name)
    }

    /// Binds to the local `address` (an IPv4 or IPv6 literal of this machine).
    /// - Throws: ``NetworkSettingError/invalidAddress(_:)`` when it is not an address literal.
    public static func address(_ address: String) throws(NetworkSettingError) -> LocalEndpoint {
        var bare = address
        if bare.hasPrefix("[") && bare.hasSuffix("]") && bare.count > 2 { bare = String(bare.dropFirst().dropLast()) }
        guard IPAddressLiteral.family(of: bare) != nil else { throw .invalidAddress(address) }
        return LocalEndpoint(curlValue: "host!" + bare)
    }

    /// The endpoint in libcurl's syntax (`if!lo`, `host!127.0.0.1`).
    public var description: String { curlValue }
}
