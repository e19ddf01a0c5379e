import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An in-memory store of decoded images by identifier (AFNetworking's `AFImageCache`).
///
/// Implementations must be safe to call from any thread: the downloader adds images from its
/// completion queue while bindings read them on the UI queue.
public protocol ImageCache: AnyObject, Sendable {
    /// Stores `image` under `identifier`, replacing any image stored there.
    func add(_ image: Image, withIdentifier identifier: String)

    /// Removes the image stored under `identifier`.
    ///
    /// - Returns: Whether an image was removed.
    @discardableResult
    func removeImage(withIdentifier identifier: String) -> Bool

    /// Removes every image.
    ///
    /// - Returns: Whether any image was removed (false when the cache was already empty).
    @discardableResult
    func removeAllImages() -> Bool

    /// The image stored under `identifier`, if any. Reading counts as an access.
    func image(withIdentifier identifier: String) -> Image?
}
