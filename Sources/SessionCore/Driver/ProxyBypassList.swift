import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `SessionConfiguration.proxyBypassList` split between what libcurl's `NOPROXY` matches
/// and what it does not.
///
/// libcurl 7.88 matches an IPv6 host against `NOPROXY` as text only: an entry in brackets
/// (`[::1]`, the way URLs write it) never matches, nor does any IPv6 range (`fd00::/8`),
/// and `*` means every host only when it is the whole list. So `*` anywhere becomes the
/// whole list, and every IPv6 entry (address or range, bracketed or not) is matched here,
/// on the address itself, whatever its spelling in the URL (`[::1]`, `[0:0::1]`): a request
/// to one goes direct. The rest (names, domains, IPv4 addresses and ranges) is libcurl's.
struct ProxyBypassList: Sendable {
    /// The entries for `CURLOPT_NOPROXY`; nil for an empty list (the environment's
    /// `no_proxy` applies), "" when every entry is matched here (the list still replaces the
    /// environment's, as a non-empty list does).
    let noProxy: String?
    /// IPv6 ranges (an address is a /128) matched by `bypasses(host:)`.
    private let ranges: [Range]

    private struct Range: Sendable {
        var address: [UInt8]
        var bits: Int
    }

    init(_ entries: [String]) {
        var names: [String] = []
        var ranges: [Range] = []
        for raw in entries {
            let entry = raw.trimmingCharacters(in: .whitespaces)
            guard !entry.isEmpty else { continue }
            if entry == "*" {
                self.noProxy = "*"
                self.ranges = []
                return
            }
            if let range = Self.ipv6Range(entry) {
                ranges.append(range)
            } else {
                names.append(entry)
            }
        }
        noProxy = names.isEmpty ? (ranges.isEmpty ? nil : "") : names.joined(separator: ",")
        self.ranges = ranges
    }

    /// Whether some IPv6 entries are matched here rather than by libcurl.
    var hasAddressRanges: Bool { !ranges.isEmpty }

    /// Whether `host` (a URL's host, brackets or not) is an IPv6 address inside one of the
    /// entries.
    func bypasses(host: String) -> Bool {
        guard !ranges.isEmpty, let address = Self.ipv6Address(Self.unbracketed(host)) else { return false }
        return ranges.contains { range in
            var remaining = range.bits
            for index in 0..<16 where remaining > 0 {
                let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
                if address[index] & mask != range.address[index] & mask { return false }
                remaining -= 8
            }
            return true
        }
    }

    /// `addr`, `[addr]`, `addr/bits` or `[addr]/bits` for an IPv6 address; nil otherwise.
    private static func ipv6Range(_ entry: String) -> Range? {
        var text = Substring(entry)
        var bits = 128
        if let slash = text.lastIndex(of: "/") {
            guard let value = Int(text[text.index(after: slash)...]), (0...128).contains(value) else { return nil }
            bits = value
            text = text[..<slash]
        }
        guard let address = ipv6Address(unbracketed(String(text))) else { return nil }
        return Range(address: address, bits: bits)
    }

    /// A URL's host without the brackets of an IPv6 literal (`[::1]` → `::1`); any other text
    /// as it is.
    static func unbracketed(_ text: String) -> String {
        guard text.hasPrefix("["), text.hasSuffix("]"), text.count >= 2 else { return text }
        return String(text.dropFirst().dropLast())
    }

    /// The 16 bytes of an IPv6 address (no zone), or nil.
    private static func ipv6Address(_ text: String) -> [UInt8]? {
        guard text.contains(":") else { return nil }
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }
}
