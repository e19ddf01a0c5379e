import Foundation
import Serialization
import SessionCore
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Downloads images through its own session manager, merging requests for the same URL,
/// limiting how many run at once and storing results in an image cache (AFNetworking's
/// `AFImageDownloader`).
///
/// - Requests for a URL already being downloaded join that transfer: each caller gets a
///   receipt of its own and its own handlers; ``cancelTask(for:)`` withdraws one receipt, and
///   cancels the transfer only when no receipt is left.
/// - At most ``maximumActiveDownloads`` transfers run at once; the rest wait, started in
///   ``downloadPrioritization`` order (a waiting download whose task has a higher
///   `SessionTask.priority` goes first: prefetches wait behind what is on screen).
/// - The ``imageCache`` is consulted first unless the request's `cachePolicy` says to reload
///   or the request shapes its own answer (a range, a condition, `Cache-Control: no-cache`),
///   and every downloaded image is offered to it but a part (a 206, a range's answer) and a
///   `no-store` request's.
/// - A download is known by the caller's URL from request to cancel: a `RequestAdapter` on
///   the manager that rewrites URLs changes what is sent, not merging, cancelling or the
///   cache key (images are cached under the caller's request).
/// - Handlers run on `sessionManager.completionQueue`; no lock is held while they, the cache
///   or the session manager's hooks run.
public final class ImageDownloader: Sendable {
    /// Called with the request, the response (nil for an image from the cache) and the image.
    public typealias SuccessHandler = @Sendable (URLRequest, HTTPURLResponse?, Image) -> Void
    /// Called with the request, the response if one arrived, and the error.
    public typealias FailureHandler = @Sendable (URLRequest, HTTPURLResponse?, any Error) -> Void

    /// Everything mutable, behind `state`'s lock.
    struct State: Sendable {
        var queue: ImageDownloadQueue
        var imageCache: (any ImageRequestCache)?
        /// HTTP credentials and the origins they are for (see ImageDownloader+Credentials).
        var credentials = ImageDownloadCredentials()
        var installedChallengeHandler = false
    }

    /// The downloader the bindings use unless told otherwise: its own manager (see
    /// ``makeDefaultSessionManager()``), FIFO, 4 downloads at once, a default
    /// ``AutoPurgingImageCache``.
    public static let defaultInstance = ImageDownloader()

    /// The manager that runs the transfers; its `responseSerializer` must produce ``Image``
    /// values (any other output fails the download with ``ImageError/unexpectedResponseObject(_:)``).
    public let sessionManager: HTTPSessionManager
    /// The order waiting downloads start in.
    public let downloadPrioritization: ImageDownloadPrioritization
    /// How many transfers run at once (at least 1).
    public let maximumActiveDownloads: Int

    let state: Mutex<State>

    /// Creates a downloader.
    ///
    /// - Parameters:
    ///   - sessionManager: Runs the transfers. Default: ``makeDefaultSessionManager()``.
    ///   - downloadPrioritization: The order waiting downloads start in. Default `.fifo`.
    ///   - maximumActiveDownloads: How many transfers run at once. Default 4; values below 1
    ///     mean 1.
    ///   - imageCache: Where images are looked up and stored; nil for none. Default: a new
    ///     ``AutoPurgingImageCache`` (100 MiB / 60 MiB).
    public init(
        sessionManager: HTTPSessionManager = ImageDownloader.makeDefaultSessionManager(),
        downloadPrioritization: ImageDownloadPrioritization = .fifo,
        maximumActiveDownloads: Int = 4,
        imageCache: (any ImageRequestCache)? = AutoPurgingImageCache()
    ) {
        self.sessionManager = sessionManager
        self.downloadPrioritization = downloadPrioritization
        let queue = ImageDownloadQueue(prioritization: downloadPrioritization, maximumActiveDownloads: maximumActiveDownloads)
        self.maximumActiveDownloads = queue.maximumActiveDownloads
        state = Mutex(State(queue: queue, imageCache: imageCache))
    }

    /// Stops every unfinished transfer and calls each receipt's failure handler with
    /// `SessionError.cancelled` on the completion queue: every receipt hears exactly once how
    /// its download ended (the transfers' own completions find no downloader and do nothing).
    deinit {
        let downloads = state.withLock { $0.queue.removeAll() }
        for download in downloads { download.task.cancel() }
        let callbacks = sessionManager.completionQueue
        for download in downloads {
            for handler in download.handlers {
                guard let failure = handler.failure else { continue }
                let request = handler.request
                callbacks.async { failure(request, nil, SessionError.cancelled) }
            }
        }
    }

    /// The cache consulted before downloading and filled after; nil for none.
    public var imageCache: (any ImageRequestCache)? {
        get { state.withLock { $0.imageCache } }
        set { state.withLock { $0.imageCache = newValue } }
    }

    // MARK: Downloading

    /// Downloads the image for `request`, or joins the download already running for its URL.
    ///
    /// - Returns: The receipt to cancel with; nil when the image came from the cache (`success`
    ///   is then called with a nil response) or the request has no URL (`failure` is then
    ///   called with `URLError(.badURL)`). Both handlers run on `sessionManager.completionQueue`.
    @discardableResult
    public func downloadImage(
        for request: URLRequest,
        success: SuccessHandler? = nil,
        failure: FailureHandler? = nil
    ) -> ImageDownloadReceipt? {
        downloadImage(for: request, withReceiptID: UUID(), success: success, failure: failure)
    }

    /// Like ``downloadImage(for:success:failure:)``, with the receipt ID chosen by the caller
    /// (the bindings record it before the download can possibly finish).
    @discardableResult
    public func downloadImage(
        for request: URLRequest,
        withReceiptID receiptID: UUID,
        success: SuccessHandler? = nil,
        failure: FailureHandler? = nil
    ) -> ImageDownloadReceipt? {
        downloadImage(for: request, withReceiptID: receiptID, priority: nil, success: success, failure: failure)
    }

    /// The download path; `priority` (for the prefetcher) is given to a new transfer, and
    /// raises a joined one that had less. `cacheMissed` says the caller has just probed the
    /// cache with ``cachedImage(for:)`` and found nothing (the bindings, which serve a hit
    /// synchronously themselves): the cache is then not probed a second time.
    ///
    /// Why one probe is enough: ``finish(_:key:request:variant:response:)`` stores an image in the
    /// cache *before* its download leaves the table, so at every instant a finished image is
    /// either joinable or cached. A miss followed by a join (or a new transfer) can only lose
    /// to a download of the same URL that ends between the two; that costs one more transfer
    /// (answered by the response cache, when there is one), never a wrong image or a handler
    /// left uncalled. A second probe would only narrow that window, never close it: the same
    /// download may end between that probe and the locked join-or-add below. Two loads of
    /// the same URL at once are merged by that join-or-add, under one lock, whatever the
    /// cache said.
    func downloadImage(
        for request: URLRequest,
        withReceiptID receiptID: UUID,
        priority: Float?,
        cacheMissed: Bool = false,
        success: SuccessHandler?,
        failure: FailureHandler?
    ) -> ImageDownloadReceipt? {
        let callbacks = sessionManager.completionQueue
        guard let url = request.url else {
            if let failure { callbacks.async { failure(request, nil, URLError(.badURL)) } }
            return nil
        }
        // The one identity of this download from request to cancel: the caller's URL, and the
        // credentials the request carries (another user's request for the URL never joins
        // this one), the kind of its cache policy and the fields that change its answer
        // (`ImageRequestKey.mergeKey`: a reload never joins a transfer the HTTP cache may
        // answer, a cache-first request never a revalidation). The task's own request may differ (a `RequestAdapter` may change the
        // URL), so nothing here is keyed by it; receipts are found again by their task.
        // And the revision of the downloader's credentials: a request made after a sign-in,
        // a sign-out or a new password never joins a transfer that started with the ones
        // before (it would be given what they unlocked, or their 401).
        // And the decoding variant: a request made after the serializer changed (another
        // `maximumPixelSize`) never joins a transfer decoding the old way.
        let revision = state.withLock { $0.credentials.isEmpty ? nil : $0.credentials.revision }
        let key = Self.loadKey(for: request, url: url, revision: revision, decoding: decodingVariant, clearings: cacheClearings)
        let handler = ImageDownloadHandler(
            receiptID: receiptID, request: request, success: success, failure: failure,
            priority: priority ?? Self.defaultPriority)

        // 1. Join a transfer already under way for this URL.
        if let task = join(key, handler: handler, priority: priority) {
            return ImageDownloadReceipt(receiptID: receiptID, task: task)
        }

        // 2. The cache, unless the caller has just probed it (read outside the lock: the cache
        //    may be the caller's own type).
        if !cacheMissed, let image = cachedImage(for: request) {
            if let success { callbacks.async { success(request, nil, image) } }
            return nil
        }

        // 3. A new transfer (created outside the lock: the manager's class is open).
        let (id, task) = makeTask(
            for: request, key: key,
            variant: CacheVariant(
                decoding: decodingVariant, credentials: revision, trust: sessionManager.cacheTrustTag(for: request),
                cacheClearings: cacheClearings))
        if let priority { task.priority = priority }
        let outcome = state.withLock { state -> (joined: DataTask?, start: Bool) in
            // Someone may have started the same URL meanwhile: join theirs instead.
            if let existing = state.queue.join(key, handler: handler) { return (existing, false) }
            let download = MergedImageDownload(id: id, urlIdentifier: key, task: task, handlers: [handler])
            return (nil, state.queue.add(download))
        }
        if let joined = outcome.joined {
            task.cancel()  // never resumed: completes without a transfer, and is ignored
            // Lifted as a join at step 1 lifts it: a view's request joining a prefetch that
            // started meanwhile was left at the prefetch's low priority.
            Self.lift(joined, to: priority)
            return ImageDownloadReceipt(receiptID: receiptID, task: joined)
        }
        if outcome.start { task.resume() }
        return ImageDownloadReceipt(receiptID: receiptID, task: task)
    }

    /// Withdraws one receipt: its failure handler is called with `SessionError.cancelled` (on
    /// the completion queue, with the request the receipt was made for) and its success
    /// handler never. The transfer is cancelled only when no other receipt shares it.
    /// Cancelling a receipt whose download already finished, or twice, does nothing.
    ///
    /// The receipt is found by its `task`, whatever URL that task was sent to: a
    /// `RequestAdapter` on ``sessionManager`` that rewrites URLs changes nothing here.
    public func cancelTask(for receipt: ImageDownloadReceipt) {
        let withdrawal = state.withLock { $0.queue.cancel(receipt.receiptID, task: receipt.task) }
        withdrawal.orphanedTask?.cancel()
        if let (task, priority) = withdrawal.lowered { task.priority = priority }
        if let handler = withdrawal.handler, let failure = handler.failure {
            let request = handler.request
            sessionManager.completionQueue.async { failure(request, nil, SessionError.cancelled) }
        }
    }

    // MARK: Internals

    /// The priority of a request that names none: a task's default, what is on screen.
    static let defaultPriority: Float = 0.5

    /// Joins the download for `key`, if any, raising its priority to `priority`.
    private func join(_ key: String, handler: ImageDownloadHandler, priority: Float?) -> DataTask? {
        let task = state.withLock { $0.queue.join(key, handler: handler) }
        if let task { Self.lift(task, to: priority) }
        return task
    }

    /// A caller who wants a joined transfer now (no priority given: the default) lifts a
    /// low-priority prefetch; its cancel lets it fall back (`ImageDownloadQueue.cancel`).
    private static func lift(_ task: DataTask, to priority: Float?) {
        let wanted = priority ?? defaultPriority
        if task.priority < wanted { task.priority = wanted }
    }

    /// Creates the (suspended) transfer for `request`, whose image is cached under `variant`
    /// (the credentials' revision read with its merge key).
    private func makeTask(for request: URLRequest, key: String, variant: CacheVariant) -> (UInt64, DataTask) {
        let id = state.withLock { $0.queue.makeID() }
        // Weak: the downloader owns the task through its queue; the task must not own it back.
        let task = sessionManager.dataTask(with: request, uploadProgress: nil, downloadProgress: nil) { [weak self] response in
            self?.finish(id, key: key, request: request, variant: variant, response: response)
        }
        return (id, task)
    }

    /// A transfer ended (on the completion queue): cache the image, hand it to every receipt
    /// still waiting, and start the next waiting downloads.
    private func finish(_ id: UInt64, key: String, request: URLRequest, variant: CacheVariant, response: DataResponse) {
        let result: Result<Image, any Error>
        switch response.result {
        case .success(let value as Image): result = .success(value)
        case .success(let value): result = .failure(ImageError.unexpectedResponseObject(String(describing: type(of: value))))
        case .failure(let error): result = .failure(error)
        }
        // Cached before the download leaves the table: a request arriving in between joins it,
        // one arriving after finds the cache.
        // Only under the variant the transfer started with, if it still holds: a serializer or
        // a credential changed meanwhile leaves it uncached. Never an image whose server a
        // challenge handler trusted against the policy: that decision was for this transfer.
        // Nor a part of an image (a 206), nor the answer to a range or a `no-store` request.
        if case .success(let image) = result, !response.admittedByTrustOverride, response.response?.statusCode != 206,
            !ImageRequestKey.keepsItsAnswerOutOfTheImageCache(request)
        {
            let (current, cache) = state.withLock { ($0.queue.isCurrent(id, for: key), $0.imageCache) }
            let unlocked = response.metrics?.transactionMetrics.contains { $0.statusCode == 401 } ?? false
            if current, let cache, !unlocked || variant.credentials != nil, currentCacheVariant(for: request) == variant {
                let identifier = variant.identifier(unlocked: unlocked)
                if cache.shouldCacheImage(image, for: request, withAdditionalIdentifier: identifier) {
                    if let autoPurging = cache as? AutoPurgingImageCache {
                        // Emptied between the check above and the add: nothing either.
                        autoPurging.add(
                            image, withIdentifier: AutoPurgingImageCache.identifier(for: request, withAdditionalIdentifier: identifier),
                            ifNotEmptiedSince: variant.cacheClearings)
                    } else {
                        cache.add(image, for: request, withAdditionalIdentifier: identifier)
                    }
                }
            }
        }
        let (handlers, start) = state.withLock { $0.queue.finish(id, for: key) }
        for task in start { task.resume() }
        let httpResponse = response.response
        for handler in handlers {
            switch result {
            // Each receipt's own request (the one it was made for, as its cancel reports it),
            // not the request of the receipt that started the transfer.
            case .success(let image): handler.success?(handler.request, httpResponse, image)
            case .failure(let error): handler.failure?(handler.request, httpResponse, error)
            }
        }
    }

    /// A snapshot of the bookkeeping (tests: nothing may be left behind).
    var pendingDownloadCount: (merged: Int, waiting: Int, active: Int) {
        state.withLock { ($0.queue.merged.count, $0.queue.waitingCount, $0.queue.active.count) }
    }
}
