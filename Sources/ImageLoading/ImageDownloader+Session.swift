import Foundation
import SessionCore
import Synchronization
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

    /// The credential answering HTTP Basic and Digest challenges (a 401 offering either) of
    /// this downloader's transfers; nil (the default) lets such a 401 fail the download.
    ///
    /// Setting a credential the first time installs the downloader's challenge handler on
    /// ``sessionManager`` (replacing any handler set there before; give the downloader a
    /// manager of its own if you need a handler of yours). The credential is offered once per
    /// transfer and only to the origin that asked, so a wrong one ends in the 401, not a loop.
    /// Server trust challenges keep their default handling.
    public var credential: URLCredential? {
        get { state.withLock { $0.credential } }
        set {
            let install = state.withLock { state -> Bool in
                state.credential = newValue
                defer { state.installedChallengeHandler = state.installedChallengeHandler || newValue != nil }
                return newValue != nil && !state.installedChallengeHandler
            }
            guard install else { return }
            // Weak: the manager keeps its handler; the handler must not keep the downloader.
            sessionManager.setAuthenticationChallengeHandler { [weak self] _, challenge in
                let method = challenge.protectionSpace.authenticationMethod
                guard method == NSURLAuthenticationMethodHTTPBasic || method == NSURLAuthenticationMethodHTTPDigest,
                      challenge.previousFailureCount == 0, let credential = self?.credential
                else { return .performDefaultHandling }
                return .useCredential(credential)
            }
        }
    }
}
