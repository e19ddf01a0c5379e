import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An ``ImageCache`` that also stores images by request (AFNetworking's `AFImageRequestCache`):
/// what ``ImageDownloader`` and the bindings use.
public protocol ImageRequestCache: ImageCache {
    /// Stores `image` for `request`; `identifier` distinguishes variants of one URL (a resized
    /// copy, say).
    func add(_ image: Image, for request: URLRequest, withAdditionalIdentifier identifier: String?)

    /// Removes the image stored for `request` and `identifier`.
    ///
    /// - Returns: Whether an image was removed.
    @discardableResult
    func removeImage(for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Bool

    /// The image stored for `request` and `identifier`, if any.
    func image(for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Image?

    /// Whether the downloader should store `image`, just downloaded for `request`.
    func shouldCacheImage(_ image: Image, for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Bool
}
