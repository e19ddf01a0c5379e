import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An in-memory image cache with a byte budget (AFNetworking's `AFAutoPurgingImageCache`).
///
/// Every image costs ``cost(of:)`` bytes: `width × height × 4` per frame, so a still image
/// costs `width × height × 4` and an animation of `n` frames `n` times that (its decoded
/// canvases are what it holds in memory). When an addition takes ``memoryUsage`` above
/// ``memoryCapacity``, images are dropped until the usage is at or below
/// ``preferredMemoryCapacity``: first those costing more than the preferred capacity by
/// themselves (the purge could never keep one, and in plain least-recently-used order every
/// other image went before it), then the least recently used (added or read). An image costing
/// more than ``memoryCapacity`` is not stored. Both budgets can be changed at any time
/// (``setMemoryCapacity(_:preferredMemoryCapacity:)``); lowering the capacity below the usage
/// purges at once.
///
/// Images stored for a request are keyed by the request's absolute URL string followed by the
/// additional identifier, if any, as in AFNetworking.
///
/// Thread-safe: all state lives behind one lock, which is never held while calling out.
public final class AutoPurgingImageCache: ImageRequestCache {
    /// One stored image and when it was last used.
    private struct Entry {
        var image: Image
        var cost: UInt64
        /// The access clock's value at the last add or read: larger is more recent.
        var lastAccess: UInt64
    }

    /// Everything mutable, guarded by `state`'s lock.
    private struct State {
        var entries: [String: Entry] = [:]
        var memoryUsage: UInt64 = 0
        /// A counter rather than a clock: two accesses in the same instant still have an order.
        var accessClock: UInt64 = 0
        /// The budgets, kept together so that a reader never sees one without the other:
        /// `preferredMemoryCapacity <= memoryCapacity` always holds.
        var memoryCapacity: UInt64
        var preferredMemoryCapacity: UInt64
        /// How many times the cache was emptied (`removeAllImages`): a download that started
        /// before stores nothing after (`add(_:withIdentifier:ifNotEmptiedSince:)`).
        var clearings: UInt64 = 0
    }

    private let state: Mutex<State>

    /// Creates an empty cache.
    ///
    /// - Parameters:
    ///   - memoryCapacity: Purge when the usage exceeds this many bytes. Default 100 MiB.
    ///   - preferredMemoryCapacity: Purge down to this many bytes. Default 60 MiB. A value
    ///     above `memoryCapacity` is lowered to it.
    public init(memoryCapacity: UInt64 = 100 * 1024 * 1024, preferredMemoryCapacity: UInt64 = 60 * 1024 * 1024) {
        state = Mutex(State(
            memoryCapacity: memoryCapacity, preferredMemoryCapacity: min(preferredMemoryCapacity, memoryCapacity)))
    }

    // MARK: Budgets

    /// The usage above which a purge runs, in bytes (AFNetworking's `memoryCapacity`).
    ///
    /// Setting it keeps ``preferredMemoryCapacity`` at or below it (a preferred capacity above
    /// the new value is lowered to it), and purges at once when the usage is above the new
    /// value. 0 keeps nothing: every image is dropped as soon as it is added. `UInt64.max`
    /// never purges.
    public var memoryCapacity: UInt64 {
        get { state.withLock { $0.memoryCapacity } }
        set { setMemoryCapacity(newValue, preferredMemoryCapacity: nil) }
    }

    /// The usage a purge brings the cache down to (at most), in bytes.
    ///
    /// Setting it never purges by itself (a purge runs when the usage exceeds
    /// ``memoryCapacity``); a value above ``memoryCapacity`` is lowered to it. To raise both
    /// budgets, use ``setMemoryCapacity(_:preferredMemoryCapacity:)``: set one at a time, the
    /// preferred capacity would be lowered to the old capacity first.
    public var preferredMemoryCapacity: UInt64 {
        get { state.withLock { $0.preferredMemoryCapacity } }
        set {
            state.withLock { state in
                state.preferredMemoryCapacity = min(newValue, state.memoryCapacity)
            }
        }
    }

    /// AFNetworking's name for ``preferredMemoryCapacity`` (`preferredMemoryUsageAfterPurge`):
    /// the same budget.
    public var preferredMemoryUsageAfterPurge: UInt64 {
        get { preferredMemoryCapacity }
        set { preferredMemoryCapacity = newValue }
    }

    /// Sets both budgets in one step, so that no reader or concurrent addition sees one
    /// without the other. `preferredMemoryCapacity` above `memoryCapacity` is lowered to it
    /// (as in ``init(memoryCapacity:preferredMemoryCapacity:)``); nil keeps the current
    /// preferred capacity (lowered to `memoryCapacity` if above it). When the usage is above
    /// the new capacity, images are dropped at once, down to the new preferred capacity, in
    /// the purge's order (those larger than it first, then the least recently used).
    public func setMemoryCapacity(_ memoryCapacity: UInt64, preferredMemoryCapacity: UInt64?) {
        // The purged images are released after the lock, so their deallocation happens outside it.
        let purged = state.withLock { state -> [Entry] in
            state.memoryCapacity = memoryCapacity
            state.preferredMemoryCapacity = min(preferredMemoryCapacity ?? state.preferredMemoryCapacity, memoryCapacity)
            return Self.purgeIfNeeded(&state)
        }
        _ = purged
    }

    /// The bytes the stored images cost now: the exact sum of ``cost(of:)`` over them.
    public var memoryUsage: UInt64 { state.withLock { $0.memoryUsage } }

    /// The number of stored images.
    public var count: Int { state.withLock { $0.entries.count } }

    /// What an image costs in this cache: its ``Image/memoryCost``, `width × height × 4` bytes
    /// for each frame (at least one), saturating instead of overflowing.
    public static func cost(of image: Image) -> UInt64 {
        image.memoryCost
    }

    // MARK: ImageCache

    /// Stores `image` under `identifier` (replacing any image there), then purges if the usage
    /// exceeds ``memoryCapacity``. An image costing more than ``memoryCapacity`` by itself is
    /// not stored (the image stored under `identifier` before is removed). One costing more
    /// than ``preferredMemoryCapacity`` is kept while there is room, and a purge drops such
    /// images first: in plain least-recently-used order it dropped every other image and then
    /// the large one too (one 24-megapixel photo emptied a cache of thumbnails).
    public func add(_ image: Image, withIdentifier identifier: String) {
        add(image, withIdentifier: identifier, ifNotEmptiedSince: nil)
    }

    /// How many times the cache was emptied so far (``removeAllImages()``).
    var clearings: UInt64 { state.withLock { $0.clearings } }

    /// Adds `image` unless the cache was emptied since it counted `clearings` (nil: always).
    /// An app empties the cache at a sign-out: an image whose download started before (the
    /// signed-out user's, unlocked by cookies the request did not show) must not be put back
    /// when it arrives after, to answer the next user. Checked under the lock the add takes.
    func add(_ image: Image, withIdentifier identifier: String, ifNotEmptiedSince clearings: UInt64?) {
        let cost = Self.cost(of: image)
        // The purged images are released after the lock, so their deallocation happens outside it.
        let purged = state.withLock { state -> [Entry] in
            if let clearings, clearings != state.clearings { return [] }
            if cost > state.memoryCapacity {
                guard let previous = state.entries.removeValue(forKey: identifier) else { return [] }
                state.memoryUsage = state.memoryUsage.subtractingSaturating(previous.cost)
                return [previous]
            }
            if let previous = state.entries[identifier] { state.memoryUsage = state.memoryUsage.subtractingSaturating(previous.cost) }
            state.accessClock += 1
            state.entries[identifier] = Entry(image: image, cost: cost, lastAccess: state.accessClock)
            state.memoryUsage = state.memoryUsage.addingSaturating(cost)
            return Self.purgeIfNeeded(&state)
        }
        _ = purged
    }

    /// Removes the image stored under `identifier`.
    @discardableResult
    public func removeImage(withIdentifier identifier: String) -> Bool {
        let removed = state.withLock { state -> Entry? in
            guard let entry = state.entries.removeValue(forKey: identifier) else { return nil }
            state.memoryUsage = state.memoryUsage.subtractingSaturating(entry.cost)
            return entry
        }
        return removed != nil
    }

    /// Removes every image; false when the cache was already empty.
    @discardableResult
    public func removeAllImages() -> Bool {
        let removed = state.withLock { state -> [String: Entry] in
            defer {
                state.entries = [:]
                state.memoryUsage = 0
                state.clearings &+= 1
            }
            return state.entries
        }
        return !removed.isEmpty
    }

    /// The image stored under `identifier`; reading it makes it the most recently used.
    public func image(withIdentifier identifier: String) -> Image? {
        state.withLock { state in
            guard var entry = state.entries[identifier] else { return nil }
            state.accessClock += 1
            entry.lastAccess = state.accessClock
            state.entries[identifier] = entry
            return entry.image
        }
    }

    // MARK: ImageRequestCache

    /// Stores `image` under ``identifier(for:withAdditionalIdentifier:)``.
    public func add(_ image: Image, for request: URLRequest, withAdditionalIdentifier identifier: String?) {
        add(image, withIdentifier: Self.identifier(for: request, withAdditionalIdentifier: identifier))
    }

    /// Removes the image stored under ``identifier(for:withAdditionalIdentifier:)``.
    @discardableResult
    public func removeImage(for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Bool {
        removeImage(withIdentifier: Self.identifier(for: request, withAdditionalIdentifier: identifier))
    }

    /// The image stored under ``identifier(for:withAdditionalIdentifier:)``.
    public func image(for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Image? {
        image(withIdentifier: Self.identifier(for: request, withAdditionalIdentifier: identifier))
    }

    /// Always true: every downloaded image is stored.
    public func shouldCacheImage(_ image: Image, for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Bool {
        true
    }

    /// The key an image for `request` is stored under: the absolute URL string followed by
    /// `additionalIdentifier` (AFNetworking's key). A request without URL uses the empty string.
    /// Begin an identifier with a space (no absolute URL holds one): otherwise a URL plus the
    /// identifier may be another URL's plain key.
    /// A request that carries credentials of its own (`Authorization`, `Proxy-Authorization`,
    /// `Cookie`, a URL user) has their name added (`URLRequest.credentialsDigest`), so that one
    /// user's image is never another's answer for the same URL; without, the key is
    /// AFNetworking's exactly.
    public static func identifier(for request: URLRequest, withAdditionalIdentifier additionalIdentifier: String?) -> String {
        (request.url?.absoluteString ?? "") + (additionalIdentifier ?? "") + ImageRequestKey.suffix(for: request)
    }

    // MARK: Purging

    /// Drops entries until the usage is at or below the preferred capacity, when it exceeds
    /// the capacity: first those costing more than the preferred capacity by themselves (which
    /// that purge could never keep), then the least recently used. Returns the dropped entries
    /// (released by the caller, after the lock).
    private static func purgeIfNeeded(_ state: inout State) -> [Entry] {
        guard state.memoryUsage > state.memoryCapacity else { return [] }
        let preferred = state.preferredMemoryCapacity
        let byAge = state.entries.sorted {
            ($0.value.cost > preferred ? 0 : 1, $0.value.lastAccess) < ($1.value.cost > preferred ? 0 : 1, $1.value.lastAccess)
        }
        var purged: [Entry] = []
        for (key, entry) in byAge {
            guard state.memoryUsage > state.preferredMemoryCapacity else { break }
            state.entries[key] = nil
            state.memoryUsage = state.memoryUsage.subtractingSaturating(entry.cost)
            purged.append(entry)
        }
        return purged
    }
}

/// Saturating arithmetic for byte counts: an absurd cost (an animation of millions of huge
/// frames) must never trap the process.
extension UInt64 {
    /// `self + other`, or `.max` when that overflows.
    fileprivate func addingSaturating(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    /// `self - other`, or 0 when that underflows (only after a saturated addition).
    fileprivate func subtractingSaturating(_ other: UInt64) -> UInt64 {
        self >= other ? self - other : 0
    }
}
