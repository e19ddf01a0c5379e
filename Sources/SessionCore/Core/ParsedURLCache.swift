import Synchronization

/// The last URLs a manager prepared, each with libcurl's parse and the origin scan, so that a
/// request to a URL seen recently skips both: about 8k instructions, most of the cost of
/// preparing a small GET.
///
/// Keyed by the exact absolute string, since both results depend on nothing else, and filled
/// only with URLs that passed validation. A URL with userinfo (`user:password@host`) is never
/// kept, so no credential outlives its request here, and neither is a very long one. FIFO and
/// small: clients return to a handful of endpoints (an API, polling, paging), while a stream
/// of unique URLs pays only one lock and a few length comparisons per request.
final class ParsedURLCache: Sendable {
    /// One prepared URL.
    struct Entry: Sendable {
        let string: String
        let origin: URLOrigin
        let curlURL: CurlURL
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
        state.withLock { state in state.entries.first { $0.string == string } }
    }

    /// Keeps `entry`, replacing the oldest when full (nothing for userinfo or long URLs).
    func keep(_ entry: Entry) {
        guard entry.string.utf8.count <= Self.longestKept, !entry.string.utf8.contains(UInt8(ascii: "@")) else { return }
        state.withLock { state in
            guard !state.entries.contains(where: { $0.string == entry.string }) else { return }
            if state.entries.count < Self.capacity {
                state.entries.append(entry)
            } else {
                state.entries[state.next] = entry
                state.next = (state.next + 1) % Self.capacity
            }
        }
    }
}
