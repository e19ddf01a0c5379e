import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Warms an ``ImageDownloader``'s cache ahead of need: the rows just below the screen, the
/// next page of a gallery.
///
/// Prefetches go through the downloader, so a prefetch and a view asking for the same URL
/// share one transfer (and the view's request lifts the transfer to the default priority).
/// At most ``maximumConcurrentPrefetches`` run at once, each at ``priority`` (low), and the
/// downloader starts waiting downloads of higher priority first: prefetching never holds up
/// what is on screen for long. URLs already cached cost nothing.
public final class ImagePrefetcher: Sendable {
    /// Everything mutable, behind `state`'s lock (never held while calling the downloader).
    private struct State {
        /// Requests waiting to start, in the order asked, by `ImageRequestKey`.
        var pending: [(key: String, request: URLRequest)] = []
        /// Running prefetches by `ImageRequestKey`: the receipt ID (recorded before the download starts)
        /// and the receipt once the downloader returned it.
        var active: [String: (receiptID: UUID, receipt: ImageDownloadReceipt?)] = [:]
    }

    /// The downloader prefetches go through (and whose cache they fill).
    public let downloader: ImageDownloader
    /// How many prefetches run at once (at least 1).
    public let maximumConcurrentPrefetches: Int
    /// The `SessionTask.priority` of the transfers a prefetch starts.
    public let priority: Float

    private let state = Mutex(State())

    /// Creates a prefetcher.
    ///
    /// - Parameters:
    ///   - downloader: The downloader to warm. Default ``ImageDownloader/defaultInstance``
    ///     (the one the bindings use unless told otherwise).
    ///   - maximumConcurrentPrefetches: How many prefetches run at once. Default 2.
    ///   - priority: The task priority of prefetch transfers, 0 to 1. Default 0.1.
    public init(downloader: ImageDownloader = .defaultInstance, maximumConcurrentPrefetches: Int = 2, priority: Float = 0.1) {
        self.downloader = downloader
        self.maximumConcurrentPrefetches = max(1, maximumConcurrentPrefetches)
        self.priority = min(1, max(0, priority))
    }

    deinit {
        for receipt in state.withLock({ $0.active.values.compactMap(\.receipt) }) { downloader.cancelTask(for: receipt) }
    }

    /// Queues the images at `urls` (requested with `Accept: image/*`) for prefetching. URLs
    /// already queued or running are not added twice.
    public func startPrefetching(for urls: [URL]) {
        startPrefetching(for: urls.map(ImageLoad.request(for:)))
    }

    /// Queues `requests` for prefetching; requests without URL are ignored, and a URL already
    /// queued or running is not added twice (with other credentials of its own, a request for
    /// the same URL is another image: `ImageDownloader` neither merges nor caches them as one).
    public func startPrefetching(for requests: [URLRequest]) {
        state.withLock { state in
            var known = Set(state.pending.map(\.key)).union(state.active.keys)
            for request in requests {
                guard let url = request.url else { continue }
                let key = ImageRequestKey.key(for: request, url: url)
                guard known.insert(key).inserted else { continue }
                state.pending.append((key, request))
            }
        }
        pump()
    }

    /// Stops prefetching `urls`: queued ones are dropped, running ones withdrawn from the
    /// downloader (whose transfer stops unless someone else wants the image).
    public func stopPrefetching(for urls: [URL]) {
        // Every prefetch of these URLs, whatever credentials its request carries.
        let stops = Set(urls.map(\.absoluteString))
        let isStopped = { (key: String) in stops.contains(String(ImageRequestKey.url(of: key))) }
        let receipts = state.withLock { state -> [ImageDownloadReceipt] in
            state.pending.removeAll { isStopped($0.key) }
            let stopped = state.active.filter { isStopped($0.key) }
            for key in stopped.keys { state.active[key] = nil }
            return stopped.values.compactMap(\.receipt)
        }
        for receipt in receipts { downloader.cancelTask(for: receipt) }
        pump()
    }

    /// Stops every prefetch, queued or running.
    public func stopPrefetchingAll() {
        let receipts = state.withLock { state -> [ImageDownloadReceipt] in
            state.pending = []
            defer { state.active = [:] }
            return state.active.values.compactMap(\.receipt)
        }
        for receipt in receipts { downloader.cancelTask(for: receipt) }
    }

    /// How many prefetches are queued and running (for tests and diagnostics).
    public var prefetchCounts: (pending: Int, active: Int) {
        state.withLock { ($0.pending.count, $0.active.count) }
    }

    // MARK: Private

    /// Starts queued prefetches while slots are free.
    private func pump() {
        let starts = state.withLock { state -> [(key: String, request: URLRequest, receiptID: UUID)] in
            var starts: [(key: String, request: URLRequest, receiptID: UUID)] = []
            while state.active.count < maximumConcurrentPrefetches, !state.pending.isEmpty {
                let next = state.pending.removeFirst()
                let receiptID = UUID()
                state.active[next.key] = (receiptID, nil)
                starts.append((next.key, next.request, receiptID))
            }
            return starts
        }
        for start in starts {
            // Weak: a prefetcher released mid-download simply stops being told.
            let done: @Sendable () -> Void = { [weak self] in self?.finish(start.key, receiptID: start.receiptID) }
            let receipt = downloader.downloadImage(
                for: start.request, withReceiptID: start.receiptID, priority: priority,
                success: { _, _, _ in done() }, failure: { _, _, _ in done() })
            guard let receipt else { continue }  // cached or no URL: `done` comes on its own
            let attached = state.withLock { state -> Bool in
                guard state.active[start.key]?.receiptID == start.receiptID else { return false }
                state.active[start.key]?.receipt = receipt
                return true
            }
            if !attached { downloader.cancelTask(for: receipt) }  // stopped meanwhile
        }
    }

    /// A prefetch ended (or was withdrawn): free its slot and start the next.
    private func finish(_ key: String, receiptID: UUID) {
        let freed = state.withLock { state -> Bool in
            guard state.active[key]?.receiptID == receiptID else { return false }
            state.active[key] = nil
            return true
        }
        if freed { pump() }
    }
}
