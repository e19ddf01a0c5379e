import Foundation
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension ImageDownloader {
    /// A manager like AFImageDownloader's own: an HTTP response cache of 20 MiB in memory and
    /// 150 MiB on disk (``defaultResponseCacheDirectory``), and an ``ImageResponseSerializer``
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
    /// user's cache directory (`$XDG_CACHE_HOME`, else `~/.cache`), else in the temporary
    /// directory.
    public static var defaultResponseCacheDirectory: URL {
        let base = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return base.appendingPathComponent("curlew/ImageDownloader", isDirectory: true)
    }
}
