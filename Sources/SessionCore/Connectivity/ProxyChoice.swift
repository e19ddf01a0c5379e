import Foundation
import Glibc

/// Which proxy libcurl connects through for a request, worked out the way libcurl 7.88 does it
/// when it sets up a connection (lib/url.c `create_conn_helper_init_proxy` and
/// `detect_proxy`, lib/noproxy.c `Curl_check_noproxy`), from the options Curlew gives it.
///
/// The connectivity wait needs it: a connection that could not be made went to the proxy
/// when there is one, and it is the route to the proxy that must be waited for, not the
/// origin's. Only the failure path asks; nothing here runs for a request that succeeds.
struct ProxyChoice {
    /// The manager's setting.
    let proxy: SessionConfiguration.Proxy
    /// Whether a proxy variable was set when the manager was made (under `.environment`
    /// Curlew otherwise tells libcurl "no proxy" outright: `SessionEngine`).
    let environmentNamesProxy: Bool
    /// What Curlew gives `CURLOPT_NOPROXY` (`ProxyBypassList.noProxy`): nil for an empty
    /// bypass list.
    let noProxy: String?
    /// The IPv6 entries of the bypass list, which Curlew matches itself (`ProxyBypassList`).
    let bypassAddresses: ProxyBypassList?

    /// The proxy (its text, as libcurl reads it) a request to `host` (without brackets) over
    /// `scheme` goes through; nil when it goes direct. `environment` reads a variable as
    /// `curl_getenv` does: an empty value is no value.
    func proxy(scheme: String, host: String, environment: (String) -> String?) -> String? {
        if let bypassAddresses, bypassAddresses.bypasses(host: host) { return nil }
        let list: String?
        let configured: String?
        switch proxy {
        case .none:
            return nil
        case .environment:
            guard environmentNamesProxy else { return nil }
            // A configured list replaces the environment's (libcurl reads `no_proxy` only
            // while `CURLOPT_NOPROXY` is unset).
            list = noProxy ?? environment("no_proxy") ?? environment("NO_PROXY")
            configured = nil
        case .url(let text):
            list = noProxy ?? ""  // Curlew always sets NOPROXY for a proxy set outright
            configured = text
        }
        if let list, Self.noProxyMatches(host: host, list: list) { return nil }
        let chosen = configured ?? Self.environmentProxy(scheme: scheme, environment: environment)
        guard let chosen, !chosen.isEmpty else { return nil }
        return chosen
    }

    /// `detect_proxy`: `<scheme>_proxy` (lowercase; for any scheme but http also the
    /// uppercase name, which a CGI request could set for http), then `all_proxy`, `ALL_PROXY`.
    static func environmentProxy(scheme: String, environment: (String) -> String?) -> String? {
        let name = scheme.lowercased() + "_proxy"
        if let value = environment(name) { return value }
        if name != "http_proxy", let value = environment(name.uppercased()) { return value }
        return environment("all_proxy") ?? environment("ALL_PROXY")
    }

    /// The scheme libcurl 7.88 reads a proxy's text as (`parse_proxy`): the URL's own, or for
    /// text without one, curl's legacy guess from the host name (`ftp.`, `dict.`, `ldap.`,
    /// `imap.`, `smtp.`, `pop3.`, else http), lower-cased.
    static func scheme(ofProxy text: String) -> String {
        if let separator = text.range(of: "://") { return text[..<separator.lowerBound].lowercased() }
        var host = Substring(text)
        if let at = host.lastIndex(of: "@") { host = host[host.index(after: at)...] }
        let name = host.lowercased()
        return ["ftp", "dict", "ldap", "imap", "smtp", "pop3"].first { name.hasPrefix($0 + ".") } ?? "http"
    }

    /// The proxy schemes libcurl 7.88 connects through; it refuses a request through any
    /// other ("Unsupported proxy scheme", `CURLE_COULDNT_CONNECT`) without connecting.
    static let connectableSchemes: Set<String> = ["http", "https", "socks", "socks4", "socks4a", "socks5", "socks5h"]

    /// Reads a variable of the process environment as `curl_getenv` does.
    static func processEnvironment(_ name: String) -> String? {
        guard let value = getenv(name), value.pointee != 0 else { return nil }
        return String(cString: value)
    }

    /// `Curl_check_noproxy` of libcurl 7.88: whether `host` (a URL's host without brackets,
    /// as libcurl keeps it) is in `list`, a `NOPROXY` value. `*` alone matches every host;
    /// entries are separated by commas or blanks; a name matches itself and its subdomains at
    /// a label boundary, case-insensitively, with a trailing dot ignored on both sides and a
    /// leading dot on the entry; an IPv4 host matches an address or a CIDR range. An IPv6 host
    /// is compared as text (libcurl 7.88 does not match IPv6 ranges: `ProxyBypassList`).
    static func noProxyMatches(host: String, list: String) -> Bool {
        let name = Array(host.utf8)
        guard !name.isEmpty, !list.isEmpty else { return false }
        if list == "*" { return true }
        var probe = in_addr()
        let isIPv4 = inet_pton(AF_INET, host, &probe) == 1
        var nameLength = name.count
        if !isIPv4, name[nameLength - 1] == UInt8(ascii: ".") { nameLength -= 1 }
        let bytes = Array(list.utf8)
        var index = 0
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        while index < bytes.count {
            while index < bytes.count, isBlank(bytes[index]) { index += 1 }
            let start = index
            while index < bytes.count, !isBlank(bytes[index]), bytes[index] != UInt8(ascii: ",") { index += 1 }
            if index > start {
                let token = bytes[start..<index]
                if isIPv4 ? cidr4Matches(host: host, entry: token) : nameMatches(name[..<nameLength], entry: token) {
                    return true
                }
            }
            while index < bytes.count, isBlank(bytes[index]) { index += 1 }
            // Blanks between entries separate them too (libcurl warns that it is deprecated).
            while index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1 }
        }
        return false
    }

    /// A host name against one entry: exact, or a subdomain of it at a label boundary.
    private static func nameMatches(_ name: ArraySlice<UInt8>, entry: ArraySlice<UInt8>) -> Bool {
        var token = entry
        if token.last == UInt8(ascii: ".") { token = token.dropLast() }
        if token.first == UInt8(ascii: ".") { token = token.dropFirst() }
        if token.count == name.count { return equalFolded(token, name) }
        guard token.count < name.count else { return false }
        let boundary = name.index(name.endIndex, offsetBy: -token.count - 1)
        return name[boundary] == UInt8(ascii: ".") && equalFolded(token, name[(boundary + 1)...])
    }

    private static func equalFolded(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { lowered($0) == lowered($1) }
    }

    private static func lowered(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }

    /// An IPv4 host against `address` or `address/bits` (`Curl_cidr4_match`; bits of 0, 32
    /// or no number compare the whole address, more than 32 or negative never match).
    private static func cidr4Matches(host: String, entry: ArraySlice<UInt8>) -> Bool {
        guard entry.count < 128 else { return false }
        var network = entry
        var bits = 0
        if let slash = entry.firstIndex(of: UInt8(ascii: "/")) {
            network = entry[..<slash]
            bits = leadingNumber(entry[(slash + 1)...])
        }
        guard (0...32).contains(bits) else { return false }  // libcurl's bits are unsigned: -1 is huge
        var address = in_addr()
        var check = in_addr()
        guard inet_pton(AF_INET, host, &address) == 1,
            inet_pton(AF_INET, String(decoding: network, as: UTF8.self), &check) == 1
        else { return false }
        let a = UInt32(bigEndian: address.s_addr)
        let b = UInt32(bigEndian: check.s_addr)
        guard bits != 0, bits != 32 else { return a == b }
        let mask = UInt32.max << UInt32(32 - bits)
        return (a ^ b) & mask == 0
    }

    /// `atoi`: the decimal digits at the start (after blanks and a sign), 0 without any;
    /// saturated, so a huge number is "more than 32".
    private static func leadingNumber(_ text: ArraySlice<UInt8>) -> Int {
        var rest = text.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var negative = false
        if let sign = rest.first, sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") {
            negative = sign == UInt8(ascii: "-")
            rest = rest.dropFirst()
        }
        var value = 0
        for byte in rest {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { break }
            value = min(value * 10 + Int(byte - UInt8(ascii: "0")), 1 << 40)
        }
        return negative ? -value : value
    }
}
