import Foundation
import ImageLoading
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An image cache of the caller's own type that counts how often it is read: the public seam
/// through which the downloader and the bindings probe a cache.
final class ProbeCountingImageCache: ImageRequestCache {
    private let storage = AutoPurgingImageCache()
    private let reads = Mutex(0)

    /// How many times an image was looked up, by request or by identifier.
    var probes: Int { reads.withLock { $0 } }

    func add(_ image: Image, withIdentifier identifier: String) { storage.add(image, withIdentifier: identifier) }
    func removeImage(withIdentifier identifier: String) -> Bool { storage.removeImage(withIdentifier: identifier) }
    func removeAllImages() -> Bool { storage.removeAllImages() }

    func image(withIdentifier identifier: String) -> Image? {
        reads.withLock { $0 += 1 }
        return storage.image(withIdentifier: identifier)
    }

    func add(_ image: Image, for request: URLRequest, withAdditionalIdentifier identifier: String?) {
        storage.add(image, for: request, withAdditionalIdentifier: identifier)
    }

    func removeImage(for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Bool {
        storage.removeImage(for: request, withAdditionalIdentifier: identifier)
    }

    func image(for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Image? {
        reads.withLock { $0 += 1 }
        return storage.image(for: request, withAdditionalIdentifier: identifier)
    }

    func shouldCacheImage(_ image: Image, for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Bool {
        true
    }
}
