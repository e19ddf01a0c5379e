import Foundation

/// A DNS server for ``SessionConfiguration/dnsServers`` (`CURLOPT_DNS_SERVERS`): an address
/// literal and a port. Only libcurl built with c-ares uses them
/// (``SessionConfiguration/supportsDNSServers``).
public struct DNSServer: Sendable, Hashable, CustomStringConvertible {
    /// The server's address, IPv6 in brackets.
    public let address: String
    /// The server's port.
    public let port: Int

    /// A server at `address` (IPv4 or IPv6 literal) on `port`.
    /// - Throws: ``NetworkSettingError`` for a bad address or port.
    public init(_ address: String, port: Int = 53) throws(NetworkSettingError) {
        self.address = try NetworkSettingError.bracketedAddress(address)
        try NetworkSettingError.checkPort(port)
        self.port = port
    }

    /// `address:port`, as libcurl's list takes it.
    public var description: String { "\(address):\(port)" }
}
