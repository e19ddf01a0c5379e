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
    public static func makeDefaultSessionManager() -> HTTPSessionManager {
        var configuration = SessionConfiguration.default
        configuration.responseCache = ResponseCache(
            memoryCapacity: 20 << 20, diskCapacity: 150 << 20, directory: defaultResponseCacheDirectory)
        let manager = HTTPSessionManager(baseURL: nil, configuration: configuration)
        manager.responseSerializer = ImageResponseSerializer()
        return manager
    }

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
