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
/// Identity: an entry is reused only for a request with the same `Authorization`,
/// `Proxy-Authorization` and `Cookie` values as the one it answered (the caller's `Cookie`
/// header or the jar's cookies for the host), the same URL user and, from a manager, the same
/// client certificate (`SessionConfiguration.clientCertificate`); the entry keeps a salted
/// SHA-256 of them, never the values. While more than one manager uses the cache it is a
/// shared cache (RFC 9111): a `private` response, or one to an authorized request that no
/// `public`, `s-maxage` or `must-revalidate` allows, is not stored, and `s-maxage` sets
/// freshness. A cache one manager uses alone is that manager's private cache: it keeps such
/// responses too, in memory only, for that manager until its session is reset
/// (`invalidateSessionCancelingTasks(_:resetSession: true)` drops them).
///
/// Stored responses never carry `Set-Cookie` or `Set-Cookie2` (the jar took them on arrival;
/// a cached answer must not replay one user's cookies). Only anonymous entries any manager may
/// reuse go to disk: an answer to a request with credentials or cookies stays in memory.
///
/// Disk: the directory is created 0700 and its files 0600; it is refused (``diskStoreError``
/// says why, and the cache keeps to memory) when it is a symbolic link, belongs to another
/// user, is writable by others, or lies below a directory another user controls (see
/// ``ResponseCacheError``). Caches given the same directory share one store on disk and its
/// size limit.
///
/// Thread safety: every member may be used from any thread (memory under one lock, the disk
/// store's index under another; entry files are read, checked and written outside both, so
/// lookups from several threads overlap; the manager does lookups and stores on its own
/// queue, never on its driver).
public final class ResponseCache: Sendable {
    /// Bytes of responses kept in memory at most.
    public let memoryCapacity: Int
    /// Bytes of responses kept on disk at most, shared with every cache on the same directory
    /// (the smallest capacity any of them asked for); 0 without a usable directory.
    public var diskCapacity: Int { disk?.capacity ?? 0 }
    /// The largest response stored: 5% of the larger capacity, as URLCache does, at least 64 KiB.
    public let maximumEntrySize: Int
    /// Where entries are stored on disk (nil: memory only).
    public let directory: URL?
    /// Why nothing is stored on disk although a directory was given (it belongs to another
    /// user, or could not be created or made private); nil when the disk store works.
    public let diskStoreError: ResponseCacheError?

    private let memory: Mutex<MemoryStore>
    private let disk: SharedDiskStore?
    /// The private-cache partitions of the managers using this cache, held weakly.
    private let users = Mutex<[WeakPartition]>([])
    /// Lookups and stores the manager makes run here, off its driver thread.
    let queue = DispatchQueue(label: "Curlew.ResponseCache")

    private struct WeakPartition {
        weak var partition: CachePartition?
    }

    /// Creates a cache.
    ///
    /// - Parameters:
    ///   - memoryCapacity: Bytes kept in memory. Default: 4 MiB.
    ///   - diskCapacity: Bytes kept in `directory`. Default: 20 MiB.
    ///   - directory: Where entries are stored on disk (created 0700 if needed; refused, see
    ///     ``diskStoreError``, when it is a link, another user owns it or a directory above
    ///     it, or others may write to it); nil keeps them in memory only. Use a
    ///     per-user directory such as `$XDG_CACHE_HOME/<app>` (`~/.cache/<app>`), never a
    ///     shared one such as /tmp. Caches given the same directory share its store.
    public init(memoryCapacity: Int = 4 << 20, diskCapacity: Int = 20 << 20, directory: URL? = nil) {
        self.memoryCapacity = max(0, memoryCapacity)
        self.directory = directory
        let requestedDisk = directory == nil ? 0 : max(0, diskCapacity)
        maximumEntrySize = max(64 << 10, max(self.memoryCapacity, requestedDisk) / 20)
        memory = Mutex(MemoryStore(capacity: self.memoryCapacity))
        // No capacity, no store: opening one would also shrink a store other caches share.
        switch requestedDisk > 0 ? directory.map({ SharedDiskStore.open(directory: $0, capacity: requestedDisk) }) : nil {
        case .success(let store):
            disk = store
            diskStoreError = nil
        case .failure(let error):
            disk = nil
            diskStoreError = error
        default:
            disk = nil
            diskStoreError = nil
        }
    }

    /// The bytes held in memory now.
    public var currentMemoryUsage: Int { memory.withLock { $0.usage } }
    /// The bytes held on disk now (by every cache on the same directory).
    public var currentDiskUsage: Int { disk?.withStore { $0.currentUsage() } ?? 0 }

    /// The stored response for `request`'s URL, if any, if it matches the request's `Vary`
    /// fields and was stored for a request with the same credentials and cookie header (see
    /// the identity rules above); entries kept for one manager alone are not returned here.
    /// Fresh or not: freshness is the manager's decision.
    public func cachedResponse(for request: URLRequest) -> CachedResponse? {
        cachedResponse(for: request, identity: CacheIdentity(request: request, jarCookies: nil), partition: nil)
    }

    /// Stores `response` for `request`'s URL (replacing what was there), for requests with
    /// `request`'s credentials and cookie header, without its `Set-Cookie` fields; a response
    /// larger than ``maximumEntrySize`` is not stored, and one for a request with credentials
    /// or a cookie header is kept in memory only.
    public func storeCachedResponse(_ response: CachedResponse, for request: URLRequest) {
        var entry = response
        entry.identityTag = CacheIdentity(request: request, jarCookies: nil).tag()
        entry.partition = nil
        entry.trustTag = CacheTrust.anyTrust  // the caller vouches for it
        store(entry, for: request)
    }

    /// Removes the stored response for `request`'s URL.
    public func removeCachedResponse(for request: URLRequest) {
        guard let key = Self.key(for: request) else { return }
        memory.withLock { $0.remove(key) }
        disk?.withStore { $0.remove(key: key) }
    }

    /// Removes every stored response, in memory and on disk (on disk: also those other caches
    /// on the same directory stored).
    public func removeAllCachedResponses() {
        memory.withLock { $0.removeAll() }
        disk?.withStore { $0.removeAll() }
    }

    // MARK: - The manager's side

    /// The entry for `request` if `identity` may reuse it: the same identity, either shared
    /// or in `partition`, and (for a lookup with a `trust` tag) filed under that trust, or
    /// stored by the caller (`CacheTrust.anyTrust`).
    func cachedResponse(
        for request: URLRequest, identity: CacheIdentity, partition: UUID?, trust: String? = nil
    ) -> CachedResponse? {
        guard let key = Self.key(for: request) else { return nil }
        let entry: CachedResponse?
        if let hit = memory.withLock({ $0.entry(for: key) }) {
            entry = hit
        } else if var loaded = disk?.load(key: key) {
            // An older Curlew's file may still hold cookies.
            loaded.fields.removeAll { Self.cookieSettingFields.contains($0.name.lowercased()) }
            memory.withLock { $0.store(loaded, for: key) }
            entry = loaded
        } else {
            entry = nil
        }
        guard let entry, entry.partition == nil || entry.partition == partition, identity.matches(entry.identityTag),
            trust == nil || entry.trustTag == trust || entry.trustTag == CacheTrust.anyTrust, Self.matchesVary(entry, request)
        else { return nil }
        return entry
    }

    /// Stores an entry already tagged with its identity and partition, without its
    /// `Set-Cookie` fields. Only anonymous shared entries of a URL without user or password go
    /// to disk; storing another removes the disk's copy.
    func store(_ response: CachedResponse, for request: URLRequest) {
        guard let key = Self.key(for: request) else { return }
        // A cached answer never replays cookies: the jar took them when they arrived, and one
        // user's session cookie must not reach another who is answered from the cache.
        var entry = response
        entry.fields.removeAll { Self.cookieSettingFields.contains($0.name.lowercased()) }
        guard entry.cost <= maximumEntrySize else {
            removeCachedResponse(for: request)
            return
        }
        memory.withLock { $0.store(entry, for: key) }
        // An answer to a request with credentials or cookies (a non-empty identity) stays in
        // memory: on disk, its salted digest would let anyone who reads the file test guesses
        // of a password offline, and the answer itself is that user's.
        if entry.partition == nil, entry.identityTag == nil, entry.url.user == nil, entry.url.password == nil,
            request.url?.user == nil
        {
            disk?.save(entry, key: key)
        } else {
            disk?.withStore { $0.remove(key: key) }
        }
    }

    /// Registers a manager's partition: the cache is shared while more than one is alive.
    func attach(_ partition: CachePartition) {
        users.withLock { users in
            users.removeAll { $0.partition == nil }
            users.append(WeakPartition(partition: partition))
        }
    }

    /// Whether more than one manager uses the cache now (RFC 9111's shared cache).
    var isShared: Bool {
        users.withLock { users in users.lazy.filter { $0.partition != nil }.count > 1 }
    }

    /// Drops the entries of a partition that was renewed (a reset session).
    func removeEntries(inPartition partition: UUID) {
        memory.withLock { $0.removeAll { $0.partition == partition } }
    }

    /// The response fields a cached answer never carries (lower-cased).
    static let cookieSettingFields: Set<String> = ["set-cookie", "set-cookie2"]

    /// The URL without its fragment, user and password: what entries are keyed by (a URL's
    /// credentials count in the identity instead, and never reach the disk).
    static func key(for request: URLRequest) -> String? {
        guard let url = request.url else { return nil }
        var string = url.absoluteString
        if url.user != nil || url.password != nil {
            guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
            parts.user = nil
            parts.password = nil
            guard let stripped = parts.string else { return nil }
            string = stripped
        }
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

    mutating func removeAll(where shouldRemove: (CachedResponse) -> Bool) {
        for (key, entry) in entries where shouldRemove(entry.response) { remove(key) }
    }
}
