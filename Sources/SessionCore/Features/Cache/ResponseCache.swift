import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An HTTP response cache for a `URLSessionManager` (`SessionConfiguration.responseCache`):
/// in memory and, when given a directory, on disk, with RFC 9111 freshness and validation.
///
/// The manager consults it for GET data tasks whose completion handler receives the body:
/// - a fresh entry answers the request without the network (the response's `metrics` is nil);
/// - a stale entry with an `ETag` or `Last-Modified` is revalidated with `If-None-Match` /
///   `If-Modified-Since`: a `304 Not Modified` answers the task with the stored body (and the
///   stored status, with the 304's updated fields), a `200` replaces the entry;
/// - `Vary` is honoured (a request that differs in a named field is a miss; `Vary: *` is never
///   stored); `Cache-Control: no-store` (request or response) is never stored;
/// - the request's `cachePolicy` decides first: `.reloadIgnoringLocalCacheData` skips the
///   lookup, `.returnCacheDataElseLoad` takes any entry however stale,
///   `.returnCacheDataDontLoad` (or `Cache-Control: only-if-cached`) never touches the network
///   and fails with `SessionError.resourceNotCached` on a miss, `.reloadRevalidatingCacheData`
///   always revalidates;
/// - a successful POST, PUT, PATCH or DELETE removes the entry of its URL.
///
/// Freshness is `max-age`, else `Expires` − `Date`, else 10% of the time since
/// `Last-Modified` (capped at a day) for statuses cacheable by default; the age counts `Age`,
/// the request's round trip and the time since it was stored.
///
/// Limits: each store holds at most its capacity, evicting the least recently used entries;
/// a response larger than ``maximumEntrySize`` is not stored. On disk every entry is one file
/// written to a temporary name and renamed into place, with its body's length and checksum
/// inside: a torn or foreign file is a miss (and removed), never a wrong body.
///
/// Thread safety: every member may be used from any thread (memory under one lock, disk I/O
/// under another; the manager does lookups and stores on its own queue, never on its driver).
public final class ResponseCache: Sendable {
    /// Bytes of responses kept in memory at most.
    public let memoryCapacity: Int
    /// Bytes of responses kept on disk at most (0 without a directory).
    public let diskCapacity: Int
    /// The largest response stored: 5% of the larger capacity, as URLCache does, at least 64 KiB.
    public let maximumEntrySize: Int
    /// Where entries are stored on disk (nil: memory only).
    public let directory: URL?

    private let memory: Mutex<MemoryStore>
    private let disk: Mutex<DiskStore?>
    /// Lookups and stores the manager makes run here, off its driver thread.
    let queue = DispatchQueue(label: "Curlew.ResponseCache")

    /// Creates a cache.
    ///
    /// - Parameters:
    ///   - memoryCapacity: Bytes kept in memory. Default: 4 MiB.
    ///   - diskCapacity: Bytes kept in `directory`. Default: 20 MiB.
    ///   - directory: Where entries are stored on disk (created if needed); nil keeps them in
    ///     memory only. Give each cache its own directory.
    public init(memoryCapacity: Int = 4 << 20, diskCapacity: Int = 20 << 20, directory: URL? = nil) {
        self.memoryCapacity = max(0, memoryCapacity)
        self.diskCapacity = directory == nil ? 0 : max(0, diskCapacity)
        self.directory = directory
        maximumEntrySize = max(64 << 10, max(self.memoryCapacity, self.diskCapacity) / 20)
        memory = Mutex(MemoryStore(capacity: self.memoryCapacity))
        disk = Mutex(directory.map { DiskStore(directory: $0, capacity: max(0, diskCapacity)) })
    }

    /// The bytes held in memory now.
    public var currentMemoryUsage: Int { memory.withLock { $0.usage } }
    /// The bytes held on disk now.
    public var currentDiskUsage: Int { disk.withLock { $0?.currentUsage() ?? 0 } }

    /// The stored response for `request`'s URL, if any and if it matches the request's
    /// `Vary` fields. Fresh or not: freshness is the manager's decision.
    public func cachedResponse(for request: URLRequest) -> CachedResponse? {
        guard let key = Self.key(for: request) else { return nil }
        let entry: CachedResponse?
        if let hit = memory.withLock({ $0.entry(for: key) }) {
            entry = hit
        } else if let loaded = disk.withLock({ $0?.load(key: key) }) {
            memory.withLock { $0.store(loaded, for: key) }
            entry = loaded
        } else {
            entry = nil
        }
        guard let entry, Self.matchesVary(entry, request) else { return nil }
        return entry
    }

    /// Stores `response` for `request`'s URL (replacing what was there); a response larger
    /// than ``maximumEntrySize`` is not stored.
    public func storeCachedResponse(_ response: CachedResponse, for request: URLRequest) {
        guard let key = Self.key(for: request) else { return }
        guard response.cost <= maximumEntrySize else {
            removeCachedResponse(for: request)
            return
        }
        memory.withLock { $0.store(response, for: key) }
        disk.withLock { $0?.save(response, key: key) }
    }

    /// Removes the stored response for `request`'s URL.
    public func removeCachedResponse(for request: URLRequest) {
        guard let key = Self.key(for: request) else { return }
        memory.withLock { $0.remove(key) }
        disk.withLock { $0?.remove(key: key) }
    }

    /// Removes every stored response, in memory and on disk.
    public func removeAllCachedResponses() {
        memory.withLock { $0.removeAll() }
        disk.withLock { $0?.removeAll() }
    }

    /// The URL without its fragment: what entries are keyed by.
    static func key(for request: URLRequest) -> String? {
        guard let url = request.url else { return nil }
        let string = url.absoluteString
        return string.firstIndex(of: "#").map { String(string[..<$0]) } ?? string
    }

    /// Whether `request` sends the same values as the stored one for every `Vary` field.
    static func matchesVary(_ entry: CachedResponse, _ request: URLRequest) -> Bool {
        entry.varyingRequestFields.allSatisfy { name, value in request.value(forHTTPHeaderField: name) == value }
    }
}

/// The in-memory store: entries by key, evicted least recently used first.
private struct MemoryStore {
    let capacity: Int
    private var entries: [String: (response: CachedResponse, lastUse: UInt64)] = [:]
    private var clock: UInt64 = 0
    private(set) var usage = 0

    init(capacity: Int) { self.capacity = capacity }

    mutating func entry(for key: String) -> CachedResponse? {
        guard let found = entries[key] else { return nil }
        clock += 1
        entries[key]?.lastUse = clock
        return found.response
    }

    mutating func store(_ response: CachedResponse, for key: String) {
        remove(key)
        guard response.cost <= capacity else { return }
        clock += 1
        entries[key] = (response, clock)
        usage += response.cost
        while usage > capacity, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
            remove(oldest)
        }
    }

    mutating func remove(_ key: String) {
        if let old = entries.removeValue(forKey: key) { usage -= old.response.cost }
    }

    mutating func removeAll() {
        entries.removeAll()
        usage = 0
    }
}
