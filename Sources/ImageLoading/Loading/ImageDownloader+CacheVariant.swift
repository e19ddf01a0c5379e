import Foundation
import Serialization
import SessionCore
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which images a downloader finds and stores, and which downloads it merges: the cache
/// variant an image is stored under (its decoding, the credentials that unlocked it, its
/// server's trust, the cache's clearings), the load key a download is merged under, and the
/// one cache probe of a download.
extension ImageDownloader {
    /// The cached image for `request`, when its `cachePolicy` allows the cache: the one
    /// probe of a download (see ``downloadImage(for:withReceiptID:priority:cacheMissed:success:failure:)``),
    /// and, on a miss while the downloader holds credentials, a second one for an image they
    /// unlocked (see ``CacheVariant``).
    func cachedImage(for request: URLRequest) -> Image? {
        guard Self.mayUseCache(request.cachePolicy), !ImageRequestKey.asksPastTheImageCache(request) else { return nil }
        let (cache, revision) = state.withLock { ($0.imageCache, $0.credentials.isEmpty ? nil : $0.credentials.revision) }
        guard let cache else { return nil }
        let variant = CacheVariant(
            decoding: decodingVariant, credentials: revision, trust: sessionManager.cacheTrustTag(for: request))
        if let image = cache.image(for: request, withAdditionalIdentifier: variant.identifier(unlocked: false)) {
            return image
        }
        guard revision != nil else { return nil }
        return cache.image(for: request, withAdditionalIdentifier: variant.identifier(unlocked: true))
    }

    /// What the downloader adds to an image's cache key (the cache's additional identifier).
    ///
    /// - How the manager's serializer decodes, when it is an ``ImageResponseSerializer`` not at
    ///   its defaults (`maximumPixelSize`, `imageScale`): downloaders that share a cache and
    ///   decode differently each get their own variant. Nil otherwise: AFNetworking's key.
    /// - For an image whose transfer answered an authentication challenge (a 401 among its
    ///   exchanges: the downloader's credential, or a handler of the caller's, unlocked it),
    ///   the revision of the downloader's credentials. Such an image answers this downloader's
    ///   requests only, while its credentials stay as they were: another downloader sharing the
    ///   cache, or this one once its credential is removed or replaced, asks the server (as the
    ///   HTTP response cache never stores such a response at all). A downloader without
    ///   credentials does not cache such an image.
    /// - For an `https` image, the trust its server was admitted under (the manager's security
    ///   policy and pins, as the HTTP response cache records it): after the policy changes
    ///   (pins rotated), or for a downloader with other pins sharing the cache, it is a miss.
    struct CacheVariant: Equatable {
        /// ``ImageResponseSerializer``'s variant of the manager's serializer, if any.
        var decoding: String?
        /// The credentials' revision; nil when the downloader holds none.
        var credentials: UUID?
        /// The trust's tag (`URLSessionManager.cacheTrustTag(for:)`); nil without TLS.
        var trust: String? = nil
        /// How many times the downloader's cache had been emptied (`removeAllImages()`, an
        /// ``AutoPurgingImageCache``'s; nil for another cache): a transfer that started before
        /// a sign-out emptied it stores nothing after.
        var cacheClearings: UInt64? = nil

        /// The additional identifier of an image found or stored with this variant.
        func identifier(unlocked: Bool) -> String? {
            var identifier = decoding
            if unlocked, let credentials { identifier = (identifier ?? "") + " downloader-credentials:" + credentials.uuidString }
            if let trust { identifier = (identifier ?? "") + " trust:" + trust }
            return identifier
        }
    }

    /// The key a download of `request` is merged under, and a binding's load is known by
    /// (`ImageLoad`): the request's merge key (`ImageRequestKey.mergeKey`), the revision of the
    /// downloader's credentials, the decoding variant and how many times its cache was
    /// emptied, as they are now. A view asking again after a sign-out (a new credential, or a
    /// cookie sign-out's `removeAllImages()`), or after the serializer changed, starts a load
    /// of its own, and a download never joins one from before.
    func loadKey(for request: URLRequest, url: URL) -> String {
        let revision = state.withLock { $0.credentials.isEmpty ? nil : $0.credentials.revision }
        return Self.loadKey(for: request, url: url, revision: revision, decoding: decodingVariant, clearings: cacheClearings)
    }

    static func loadKey(for request: URLRequest, url: URL, revision: UUID?, decoding: String?, clearings: UInt64?) -> String {
        ImageRequestKey.mergeKey(for: request, url: url) + (revision.map { " downloader-credentials:" + $0.uuidString } ?? "")
            + (decoding ?? "") + (clearings.map { $0 > 0 ? " cleared:\($0)" : "" } ?? "")
    }

    /// How many times the downloader's cache was emptied (an ``AutoPurgingImageCache``'s
    /// `removeAllImages()`; nil for another cache or none).
    var cacheClearings: UInt64? {
        (state.withLock { $0.imageCache } as? AutoPurgingImageCache)?.clearings
    }

    /// The variant of the manager's current serializer (nil for a serializer of the caller's).
    var decodingVariant: String? {
        Self.decodingVariant(of: sessionManager.responseSerializer)
    }

    /// The variant images `serializer` makes are stored under: an `ImageResponseSerializer`'s,
    /// or, for a `CompoundResponseSerializer`, that of the image serializers in it (the image
    /// comes from the first that succeeds: when they decode differently, a variant naming
    /// them all, which no other serializer shares). nil for a serializer of the caller's.
    static func decodingVariant(of serializer: any ResponseSerialization) -> String? {
        if let image = serializer as? ImageResponseSerializer { return image.cacheVariant }
        guard let compound = serializer as? CompoundResponseSerializer else { return nil }
        var variants: [String?] = []
        for inner in compound.responseSerializers {
            guard inner is ImageResponseSerializer || inner is CompoundResponseSerializer else { continue }
            let variant = decodingVariant(of: inner)
            if !variants.contains(variant) { variants.append(variant) }
        }
        guard variants.count > 1 else { return variants.first ?? nil }
        return " decoded-by-any-of:[" + variants.map { $0 ?? " decoded:as-is" }.joined(separator: "|") + "]"
    }

    /// The variant a transfer for `request` started now would be stored under.
    func currentCacheVariant(for request: URLRequest) -> CacheVariant {
        let (revision, cache) = state.withLock { ($0.credentials.isEmpty ? nil : $0.credentials.revision, $0.imageCache) }
        return CacheVariant(
            decoding: decodingVariant, credentials: revision, trust: sessionManager.cacheTrustTag(for: request),
            cacheClearings: (cache as? AutoPurgingImageCache)?.clearings)
    }

    /// Whether `policy` lets a request be answered from the image cache (AFNetworking's rule:
    /// the policies that may return cached data).
    static func mayUseCache(_ policy: URLRequest.CachePolicy) -> Bool {
        switch policy {
        case .useProtocolCachePolicy, .returnCacheDataElseLoad, .returnCacheDataDontLoad: return true
        default: return false
        }
    }
}
