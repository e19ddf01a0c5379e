import Foundation
import Synchronization

/// The last URLs a manager prepared, each with libcurl's parse and the origin scan, so that a
/// request to a URL seen recently skips both: about 8k instructions, most of the cost of
/// preparing a small GET.
///
/// Keyed by the exact bytes of the absolute string, since both results depend on nothing else
/// (not by `String` equality, under which canonically equivalent Unicode strings are equal), and
/// filled only with URLs that passed validation. A URL with userinfo (`user:password@host`) is
/// never kept, so no credential outlives its request here, and neither is a very long one or
/// one with bytes beyond ASCII. FIFO and small: clients return to a handful of endpoints (an
/// API, polling, paging), while a stream of unique URLs pays two locks and a few comparisons
/// per request.
final class ParsedURLCache: Sendable {
    /// One prepared URL.
    struct Entry: Sendable {
        let string: String
        let origin: URLOrigin
        let curlURL: CurlURL
        /// Foundation's host and the port of an `https` URL (nil for others), what the TLS
        /// policy checks the certificate against: found once here, on the caller's thread,
        /// not by Foundation's URL parser on the driver thread at every request (~1,600
        /// instructions, callgrind).
        var tlsTarget: TLSTarget? = nil
    }

    /// The host and port a TLS handshake for a URL is judged for.
    struct TLSTarget: Sendable {
        let host: String?
        let port: Int

        init(_ url: URL) {
            host = url.host
            port = URLOrigin.port(of: url, assumedScheme: "https")
        }
    }

    private struct State {
        var entries: [Entry] = []
        var next = 0
    }

    static let capacity = 8
    /// Longer URLs are not kept (a bound on the memory the cache holds).
    static let longestKept = 2048

    // Caller threads prepare tasks, the driver thread prepares redirects: the Mutex serialises them.
    private let state = Mutex(State())

    /// The entry for `string`, if it is kept.
    func entry(for string: String) -> Entry? {
        var key = string
        return key.withUTF8 { key in state.withLock { state in state.entries.first { Self.bytes(of: $0.string, equal: key) } } }
    }

    /// Whether `string`'s UTF-8 bytes are `bytes` (one `memcmp`: iterating the UTF-8 view
    /// cost ~60 instructions a byte).
    private static func bytes(of string: String, equal bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard string.utf8.count == bytes.count else { return false }
        var copy = string
        return copy.withUTF8 { own in
            guard let a = own.baseAddress, let b = bytes.baseAddress else { return own.count == bytes.count }
            return memcmp(a, b, own.count) == 0
        }
    }

    /// Keeps `entry`, replacing the oldest when full (nothing for userinfo, long or non-ASCII
    /// URLs).
    func keep(_ entry: Entry) {
        guard entry.string.utf8.count <= Self.longestKept,
            !entry.string.utf8.contains(where: { $0 == UInt8(ascii: "@") || $0 >= 0x80 })
        else { return }
        var key = entry.string
        key.withUTF8 { key in state.withLock { state in
            // Two callers may have parsed the same URL at once: keep one entry.
            guard !state.entries.contains(where: { Self.bytes(of: $0.string, equal: key) }) else { return }
            if state.entries.count < Self.capacity {
                state.entries.append(entry)
            } else {
                state.entries[state.next] = entry
                state.next = (state.next + 1) % Self.capacity
            }
        } }
    }
}
