import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The categories' algorithm, shared by every binding (UIImageView+AFNetworking's
/// `setImageWithURLRequest:placeholderImage:success:failure:`, UIButton's per-state twins).
enum ImageLoad {
    /// Shows an image (or nil) in one slot of a displaying object.
    typealias Show = @Sendable (AnyObject, Image?) -> Void

    /// Loads `request` into `slot` of `owner`:
    /// - no URL: cancels the slot's download, shows `placeholder` (nil included) and calls
    ///   `failure` with `URLError(.badURL)`, before returning;
    /// - the same URL already downloading for the slot (the same credentials, cache policy
    ///   and answer-shaping fields: the downloader's merge key): nothing;
    /// - otherwise cancels the slot's download, then, with the image in the cache (and a
    ///   `cachePolicy` that allows it), calls `success` or shows the image, before returning;
    /// - else shows `placeholder` if there is one, and downloads: on `queue`, if the download
    ///   is still the slot's (not replaced, not cancelled) and `owner` still exists, calls
    ///   `success` (whose job it is then to show the image) or shows it; on failure calls
    ///   `failure`.
    static func start(
        _ request: URLRequest, into owner: AnyObject, slot: ImageSlot, placeholder: Image?,
        downloader: ImageDownloader, queue: DispatchQueue,
        success: ImageDownloader.SuccessHandler?, failure: ImageDownloader.FailureHandler?,
        show: @escaping Show
    ) {
        guard let url = request.url else {
            cancel(owner, slot)
            show(owner, placeholder)
            failure?(request, nil, URLError(.badURL))
            return
        }
        // Another user's load of the URL is another load, and so is a refresh, a range or a
        // cache-only load of it, or one after the downloader's credentials or decoding changed
        // (the downloader's merge key): each replaces the one before. Compared by the request's
        // key alone, a view asking again after a sign-out kept the signed-in load, and was
        // shown what that user's credential unlocked.
        let urlIdentifier = downloader.loadKey(for: request, url: url)
        if ImageBindingRegistry.isActive(owner, slot, urlIdentifier: urlIdentifier) { return }
        cancel(owner, slot)

        // The download's only cache probe: a hit is served here, on the caller, before
        // returning; a miss is not probed again by the downloader (see `cacheMissed`).
        if let cached = downloader.cachedImage(for: request) {
            if let success { success(request, nil, cached) } else { show(owner, cached) }
            return
        }
        if let placeholder { show(owner, placeholder) }

        // Recorded before the download starts, so that even an instant completion finds it.
        let receiptID = UUID()
        let weakOwner = WeakImageOwner(owner)
        ImageBindingRegistry.begin(
            weakOwner, slot, ActiveImageDownload(receiptID: receiptID, urlIdentifier: urlIdentifier, downloader: downloader))
        let receipt = downloader.downloadImage(
            for: request, withReceiptID: receiptID, priority: nil, cacheMissed: true,
            success: { request, response, image in
                queue.async {
                    guard ImageBindingRegistry.finish(weakOwner, slot, receiptID: receiptID),
                          let owner = weakOwner.object else { return }
                    if let success { success(request, response, image) } else { show(owner, image) }
                }
            },
            failure: { request, response, error in
                queue.async {
                    guard ImageBindingRegistry.finish(weakOwner, slot, receiptID: receiptID),
                          weakOwner.object != nil else { return }
                    failure?(request, response, error)
                }
            })
        // Not attached: the slot was cancelled (or its download ended) meanwhile. Withdrawing
        // the receipt is then right, or does nothing.
        if let receipt, !ImageBindingRegistry.attach(receipt, to: weakOwner, slot) {
            downloader.cancelTask(for: receipt)
        }
    }

    /// Cancels `slot`'s download, if any: its handlers will not run (the categories'
    /// `cancelImageDownloadTask`).
    static func cancel(_ owner: AnyObject, _ slot: ImageSlot) {
        guard let active = ImageBindingRegistry.clear(owner, slot), let receipt = active.receipt else { return }
        active.downloader.cancelTask(for: receipt)
    }

    /// A request for `url` accepting images only, as the categories' URL variants build it.
    static func request(for url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.addValue("image/*", forHTTPHeaderField: "Accept")
        return request
    }
}
