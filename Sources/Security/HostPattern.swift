import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The host pattern of a `PinSet`, normalised once: an exact name, `*.base` (exactly one
/// label below `base`), `**.base` (one or more labels below it), or an IP address.
///
/// Names are compared in one form on both sides: lower case, without a trailing dot, IDN
/// labels as their A-labels (`xn--…`), IPv6 addresses without brackets and in their
/// canonical text. A pattern that cannot be read (an empty label, a `*` anywhere but as the
/// whole first label, a wildcard over an address) matches nothing.
package struct HostPattern: Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        /// The name itself (and, with `includeSubdomains`, every name below it).
        case exact
        /// Exactly one label below `name`.
        case oneLabel
        /// One or more labels below `name`.
        case anyDepth
        /// An IP address: matches only the same address.
        case address
        /// Unreadable: matches nothing.
        case invalid
    }

    let kind: Kind
    /// The normalised name (for wildcards, the part after `*.` / `**.`).
    let name: String
    let includeSubdomains: Bool

    init(_ pattern: String, includeSubdomains: Bool) {
        self.includeSubdomains = includeSubdomains
        let trimmed = pattern.trimmingCharacters(in: .whitespaces)
        var kind: Kind
        var rest: Substring
        if trimmed.hasPrefix("**.") {
            (kind, rest) = (.anyDepth, trimmed.dropFirst(3))
        } else if trimmed.hasPrefix("*.") {
            (kind, rest) = (.oneLabel, trimmed.dropFirst(2))
        } else {
            (kind, rest) = (.exact, Substring(trimmed))
        }
        guard !rest.contains("*"), let normalised = Self.normalise(String(rest)) else {
            (self.kind, self.name) = (.invalid, "")
            return
        }
        if normalised.isAddress {
            // An address matches only itself: no wildcard, no subdomain over it.
            kind = kind == .exact ? .address : .invalid
        }
        self.kind = kind
        self.name = normalised.text
    }

    /// Whether `host` (as in a URL: a name, an IPv4 address, an IPv6 address with or
    /// without brackets) is covered by this pattern.
    func matches(_ host: String) -> Bool {
        guard kind != .invalid, let candidate = Self.normalise(host) else { return false }
        if kind == .address || candidate.isAddress {
            return kind == .address && candidate.isAddress && candidate.text == name
        }
        if candidate.text == name { return kind == .exact }
        guard candidate.text.hasSuffix("." + name) else { return false }
        let below = candidate.text.dropLast(name.count + 1)
        switch kind {
        case .exact: return includeSubdomains
        case .oneLabel: return includeSubdomains || !below.contains(".")
        case .anyDepth: return true
        case .address, .invalid: return false
        }
    }

    /// The comparable form of a host name or address, or nil when it cannot be one.
    static func normalise(_ host: String) -> (text: String, isAddress: Bool)? {
        var text = host.removingPercentEncoding ?? host
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if text.hasSuffix(".") { text.removeLast() }
        guard !text.isEmpty else { return nil }
        if let address = canonicalAddress(text) { return (address, true) }
        var labels: [String] = []
        for label in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard !label.isEmpty else { return nil }
            let lower = label.lowercased()
            if lower.unicodeScalars.allSatisfy(\.isASCII) {
                labels.append(lower)
            } else if let encoded = Punycode.encode(lower) {
                labels.append("xn--" + encoded)
            } else {
                return nil
            }
        }
        return (labels.joined(separator: "."), false)
    }

    /// The canonical text of an IPv4 or IPv6 address, nil for anything else: the address
    /// libcurl connects to for a URL host written this way.
    ///
    /// libcurl reads an IPv4 address in every form `inet_aton` accepts (one to four parts,
    /// each decimal, octal with a leading `0` or hex with `0x`: `2130706433`, `127.1`,
    /// `0x7f.0.0.1` are all 127.0.0.1) and connects there, so each is that address here too;
    /// an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) reaches the IPv4 host and reads as it.
    /// Otherwise pins set for an address would not be applied to the same address written
    /// another way.
    package static func canonicalAddress(_ text: String) -> String? {
        var v4 = in_addr()
        var v6 = in6_addr()
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        if text.withCString({ inet_pton(AF_INET, $0, &v4) }) == 1 {
            guard inet_ntop(AF_INET, &v4, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        } else if text.withCString({ inet_pton(AF_INET6, $0, &v6) }) == 1 {
            let bytes = withUnsafeBytes(of: v6) { Array($0) }
            if bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return bytes.suffix(4).map(String.init).joined(separator: ".")
            }
            guard inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        } else {
            return shorthandIPv4(text)
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The dotted text of an IPv4 address written in one of `inet_aton`'s other forms (as
    /// libcurl's URL parser reads it), nil when `text` is not one.
    static func shorthandIPv4(_ text: String) -> String? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt64] = []
        for part in parts {
            guard let value = number(part) else { return nil }
            values.append(value)
        }
        // Every part but the last is one byte; the last fills the bytes left.
        var address: UInt64 = 0
        for (index, value) in values.dropLast().enumerated() {
            guard value <= 0xFF else { return nil }
            address |= value << UInt64(8 * (3 - index))
        }
        guard let last = values.last, last < UInt64(1) << UInt64(8 * (5 - values.count)) else { return nil }
        address |= last
        return [24, 16, 8, 0].map { String((address >> UInt64($0)) & 0xFF) }.joined(separator: ".")
    }

    /// One part of a shorthand IPv4 address: `0x` hex, `0` octal, else decimal; nil for
    /// anything else or a value past 32 bits.
    private static func number(_ part: Substring) -> UInt64? {
        let lower = part.lowercased()
        let (digits, radix): (Substring, Int) =
            if lower.hasPrefix("0x") { (lower.dropFirst(2), 16) } else if lower.count > 1, lower.hasPrefix("0") {
                (lower.dropFirst(), 8)
            } else { (Substring(lower), 10) }
        guard !digits.isEmpty, digits.count <= 32, digits.allSatisfy({ $0.isASCII && $0.isHexDigit }),
            let value = UInt64(digits, radix: radix), value <= 0xFFFF_FFFF
        else {
            return nil
        }
        return value
    }
}

/// RFC 3492 Punycode, the encoding of an IDN label's A-label (after `xn--`).
enum Punycode {
    private static let base: UInt32 = 36, tMin: UInt32 = 1, tMax: UInt32 = 26
    private static let skew: UInt32 = 38, damp: UInt32 = 700

    /// The Punycode of `label` (without the `xn--` prefix), nil on arithmetic overflow.
    static func encode(_ label: String) -> String? {
        let input = label.unicodeScalars.map(\.value)
        var output = input.filter { $0 < 0x80 }.map { Character(Unicode.Scalar(UInt8($0))) }
        let basicCount = output.count
        var handled = basicCount
        if basicCount > 0 { output.append("-") }
        var n: UInt32 = 0x80, delta: UInt32 = 0, bias: UInt32 = 72
        while handled < input.count {
            guard let next = input.filter({ $0 >= n }).min() else { return nil }
            let (step, overflow) = (next - n).multipliedReportingOverflow(by: UInt32(handled + 1))
            guard !overflow, delta <= UInt32.max - step else { return nil }
            delta += step
            n = next
            for scalar in input {
                if scalar < n {
                    guard delta < UInt32.max else { return nil }
                    delta += 1
                }
                guard scalar == n else { continue }
                var q = delta
                var k = base
                while true {
                    let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                    if q < t { break }
                    output.append(digit(t + (q - t) % (base - t)))
                    q = (q - t) / (base - t)
                    k += base
                }
                output.append(digit(q))
                bias = adapt(delta, points: UInt32(handled + 1), first: handled == basicCount)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return String(output)
    }

    private static func digit(_ value: UInt32) -> Character {
        Character(Unicode.Scalar(UInt8(value < 26 ? 0x61 + value : 0x30 + value - 26)))
    }

    private static func adapt(_ delta: UInt32, points: UInt32, first: Bool) -> UInt32 {
        var delta = first ? delta / damp : delta / 2
        delta += delta / points
        var k: UInt32 = 0
        while delta > ((base - tMin) * tMax) / 2 {
            delta /= base - tMin
            k += base
        }
        return k + (base - tMin + 1) * delta / (delta + skew)
    }
}
