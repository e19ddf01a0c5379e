import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Anything that shows one image: an image view of any UI toolkit (AFNetworking's
/// `UIImageView+AFNetworking`). Conform your view type by giving it an ``image`` property;
/// the loading methods come with the protocol.
///
/// The methods are meant to be called on the queue the view lives on (the main queue by
/// default), and deliver there: pass `on:` to choose another queue, for a toolkit with a run
/// loop of its own. Placeholders and cached images are set before the method returns. The
/// view is held weakly: releasing it mid-download leaves nothing behind.
public protocol ImageDisplaying: ImageDownloaderProviding {
    /// The image shown; set by the loading methods.
    var image: Image? { get set }
}

extension ImageDisplaying {
    /// Shows the image at `url` (requested with `Accept: image/*`), with `placeholderImage`
    /// until it arrives. See ``setImage(withURLRequest:placeholderImage:success:failure:on:)``.
    public func setImage(with url: URL, placeholderImage: Image? = nil, on queue: DispatchQueue = .main) {
        setImage(withURLRequest: ImageLoad.request(for: url), placeholderImage: placeholderImage, on: queue)
    }

    /// Shows the image for `request` through the shared downloader of the object's own class
    /// (`type(of: self).sharedImageDownloader`: a subclass held as its base type still uses its own).
    ///
    /// - A request without URL cancels the current download, sets ``image`` to
    ///   `placeholderImage` (nil clears it) and calls `failure` with `URLError(.badURL)`.
    /// - A request this view is already downloading does nothing: the same URL, credentials,
    ///   cache policy, range, conditions and cache directives (a `no-cache` refresh of the URL
    ///   is another load, which replaces the running one).
    /// - Otherwise the current download is cancelled. An image in the downloader's cache (when
    ///   the request's `cachePolicy` allows the cache) is used at once: `success` is called
    ///   with a nil response, or, without `success`, ``image`` is set.
    /// - Else ``image`` becomes `placeholderImage` (when one is given) and the image is
    ///   downloaded. When it arrives, and only if no later call replaced or cancelled this
    ///   download, `success` is called on `queue`, or, without `success`, ``image`` is set
    ///   there; a failure calls `failure` on `queue`.
    ///
    /// With a `success` closure, setting the image is its job.
    public func setImage(
        withURLRequest request: URLRequest,
        placeholderImage: Image? = nil,
        success: ImageDownloader.SuccessHandler? = nil,
        failure: ImageDownloader.FailureHandler? = nil,
        on queue: DispatchQueue = .main
    ) {
        ImageLoad.start(
            request, into: self, slot: .image, placeholder: placeholderImage,
            downloader: type(of: self).sharedImageDownloader, queue: queue, success: success, failure: failure,
            show: { owner, image in
                guard let view = owner as? any ImageDisplaying else { return }
                view.image = image
            })
    }

    /// Cancels the current download, if any: its image is not set and its closures do not run.
    public func cancelImageDownloadTask() {
        ImageLoad.cancel(self, .image)
    }
}
