import Foundation
/// The scheme and origin of an absolute URL string, found in one pass over its bytes.
///
/// Every request needs them on the way in (which scheme, which host's connection slot, TLS or
/// not). Foundation's `URL.scheme` and `URL.host` re-parse the string, and `host`
/// percent-decodes, on every call: about 1 µs each, several times per request. The string is
/// one that `URL` already accepted, so a plain scan is enough.
struct URLOrigin: Sendable, Equatable {
    /// The scheme, lowercased ("http", "https"); empty when the string has none.
    let scheme: String
    /// "scheme://authority" as written (userinfo and port included): the key under which
    /// transfers share a host's connection slots. Empty when there is no "//" authority.
    let origin: String
    /// Whether the authority names a host (not empty once userinfo and port are removed).
    let hasHost: Bool
    /// Whether the host is percent-encoded (then only decoding tells whether it is a name).
    let hostIsPercentEncoded: Bool

    init(_ absolute: String) {
        var copy = absolute
        (scheme, origin, hasHost, hostIsPercentEncoded) = copy.withUTF8 { Self.scan($0) }
    }

    var isHTTPS: Bool { scheme == "https" }

    /// `url`'s port, or its scheme's default (443 for https, 80 otherwise; a URL without a
    /// scheme is taken as `assumedScheme`): the one rule for comparing origins and naming
    /// protection spaces.
    static func port(of url: URL, assumedScheme: String = "http") -> Int {
        url.port ?? ((url.scheme?.lowercased() ?? assumedScheme) == "https" ? 443 : 80)
    }

    private static func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> (String, String, Bool, Bool) {
        // scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" (RFC 3986 §3.1)
        var index = 0
        while index < bytes.count, isSchemeByte(bytes[index], first: index == 0) { index += 1 }
        guard index > 0, index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return ("", "", false, false) }
        let scheme = String(unsafeUninitializedCapacity: index) { buffer in
            for offset in 0..<index { buffer[offset] = lowercased(bytes[offset]) }
            return index
        }
        let slashes = index + 1
        guard slashes + 1 < bytes.count, bytes[slashes] == UInt8(ascii: "/"), bytes[slashes + 1] == UInt8(ascii: "/")
        else { return (scheme, "", false, false) }
        let authorityStart = slashes + 2
        var authorityEnd = authorityStart
        var hostStart = authorityStart
        while authorityEnd < bytes.count {
            let byte = bytes[authorityEnd]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            if byte == UInt8(ascii: "@") { hostStart = authorityEnd + 1 }  // the last "@" ends userinfo
            authorityEnd += 1
        }
        let origin = String(decoding: UnsafeBufferPointer(rebasing: bytes[..<authorityEnd]), as: UTF8.self)
        let percent = bytes[hostStart..<authorityEnd].contains(UInt8(ascii: "%"))
        return (scheme, origin, hostLength(bytes, from: hostStart, to: authorityEnd) > 0, percent)
    }

    /// The length of the host in `bytes[start..<end]` (host [":" port], host possibly an
    /// IP literal in brackets).
    private static func hostLength(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) -> Int {
        guard start < end else { return 0 }
        if bytes[start] == UInt8(ascii: "[") {
            var close = start + 1
            while close < end, bytes[close] != UInt8(ascii: "]") { close += 1 }
            return close < end ? close - start - 1 : 0
        }
        var colon = start
        while colon < end, bytes[colon] != UInt8(ascii: ":") { colon += 1 }
        return colon - start
    }

    private static func isSchemeByte(_ byte: UInt8, first: Bool) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): return true
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."): return !first
        default: return false
        }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }
}
