import Foundation

/// One entry of ``SessionConfiguration/hostOverrides``: where requests for a host and port
/// go instead of where DNS would send them. The request itself is unchanged (its URL, `Host`
/// header, cookies, TLS server name and certificate check are the URL's host's), so a pinned
/// or HSTS host can be tested against a local server.
///
/// ```swift
/// var configuration = SessionConfiguration.default
/// configuration.hostOverrides = [
///     try .resolve("api.example.com", port: 443, to: ["127.0.0.1"]),
///     try .connect("cdn.example.com", port: 80, to: "127.0.0.1", port: 8080),
/// ]
/// ```
public struct HostOverride: Sendable, Hashable, CustomStringConvertible {
    /// What the override does.
    public enum Kind: Sendable, Hashable {
        /// The host name resolves to these addresses, on the same port (`CURLOPT_RESOLVE`).
        case resolve(addresses: [String])
        /// Connections for host and port are made to another host and port
        /// (`CURLOPT_CONNECT_TO`); the other host is resolved as usual (or by a `.resolve`
        /// override).
        case connect(host: String, port: Int)
    }

    /// The host name of the URLs this applies to, as written in them.
    public let host: String
    /// The port of the URLs this applies to (443 for an `https://` URL without one, 80 for `http://`).
    public let port: Int
    /// What happens to them.
    public let kind: Kind

    /// Requests for `host` on `port` use `addresses` (IPv4 or IPv6 literals, tried in order)
    /// instead of DNS.
    /// - Throws: ``NetworkSettingError`` for a bad host name, port or address, or no address.
    public static func resolve(_ host: String, port: Int, to addresses: [String]) throws(NetworkSettingError) -> HostOverride {
        try NetworkSettingError.checkHostName(host)
        try NetworkSettingError.checkPort(port)
        guard !addresses.isEmpty else { throw .noAddresses(host: host) }
        var checked: [String] = []
        for address in addresses { checked.append(try NetworkSettingError.bracketedAddress(address)) }
        return HostOverride(host: host, port: port, kind: .resolve(addresses: checked))
    }

    /// Connections for `host` on `port` go to `targetHost` (a name or an address literal) on
    /// `targetPort` instead.
    /// - Throws: ``NetworkSettingError`` for a bad host name or port.
    public static func connect(_ host: String, port: Int, to targetHost: String, port targetPort: Int) throws(NetworkSettingError) -> HostOverride {
        try NetworkSettingError.checkHostName(host)
        try NetworkSettingError.checkPort(port)
        try NetworkSettingError.checkPort(targetPort)
        let target: String
        if let literal = try? NetworkSettingError.bracketedAddress(targetHost) {
            target = literal
        } else {
            try NetworkSettingError.checkHostName(targetHost)
            target = targetHost
        }
        return HostOverride(host: host, port: port, kind: .connect(host: target, port: targetPort))
    }

    /// The line libcurl's option takes: `host:port:addr[,addr]` or `host:port:target:port`.
    var curlLine: String {
        switch kind {
        case .resolve(let addresses): return "\(host):\(port):" + addresses.joined(separator: ",")
        case .connect(let target, let targetPort): return "\(host):\(port):\(target):\(targetPort)"
        }
    }

    /// The override in libcurl's option syntax.
    public var description: String { curlLine }
}
