import Foundation
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension ImageDownloader {
    /// A manager like AFImageDownloader's own: an HTTP response cache of 20 MiB in memory and
    /// 150 MiB on disk (``defaultResponseCacheDirectory``; memory only without one), and an ``ImageResponseSerializer``
    /// (AFNetworking's image content types plus `image/webp`, decoding in parallel off the
    /// driver thread) turning responses into ``Image`` values.
    ///
    /// Image URLs come from content nobody vetted, so two limits differ from a plain session's:
    /// a body is collected up to ``defaultMaximumImageBodyBytes`` (an endless or 1 TB body fails
    /// with `SessionError.responseBodyTooLarge` instead of filling the memory before the
    /// decoder's pixel budget is ever asked), and a transfer lasts at most
    /// ``defaultImageResourceTimeout`` (a server dripping a byte a minute held one of the four
    /// download slots for the 7 days of `timeoutIntervalForResource`).
    public static func makeDefaultSessionManager() -> HTTPSessionManager {
        var configuration = SessionConfiguration.default
        configuration.maximumCollectedBodyBytes = defaultMaximumImageBodyBytes
        configuration.timeoutIntervalForResource = defaultImageResourceTimeout
        configuration.responseCache = ResponseCache(
            memoryCapacity: 20 << 20, diskCapacity: 150 << 20, directory: defaultResponseCacheDirectory)
        let manager = HTTPSessionManager(baseURL: nil, configuration: configuration)
        manager.responseSerializer = ImageResponseSerializer()
        return manager
    }

    /// The largest image body the default manager collects: 64 MiB (a 50-megapixel JPEG is
    /// about 25 MB; decoded images are bounded by the decoder's pixel budget).
    public static let defaultMaximumImageBodyBytes = 64 << 20

    /// How long one image transfer of the default manager may take: 5 minutes (10 MB at
    /// 40 KB/s), the idle timeout (`timeoutIntervalForRequest`, 60 s) still applying.
    public static let defaultImageResourceTimeout: TimeInterval = 300

    /// Where the default manager's response cache lives: `curlew/ImageDownloader` in the
    /// user's cache directory (`$XDG_CACHE_HOME` when it is an absolute path, else
    /// `$HOME/.cache`); nil when neither is set, and the default manager then caches in memory
    /// only. There is no shared fallback such as /tmp: another user could create the
    /// predictable path there first.
    public static var defaultResponseCacheDirectory: URL? {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let cacheHome = environment["XDG_CACHE_HOME"], cacheHome.hasPrefix("/") {
            base = URL(fileURLWithPath: cacheHome, isDirectory: true)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".cache", isDirectory: true)
        } else {
            return nil
        }
        return base.appendingPathComponent("curlew/ImageDownloader", isDirectory: true)
    }
}
