import Foundation
import SessionCore
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension ImageDownloader {
    /// A manager like AFImageDownloader's own: a fresh default configuration, and an
    /// ``ImageResponseSerializer`` (its defaults: AFNetworking's image content types plus
    /// `image/webp`, decoding off the driver thread) turning responses into ``Image`` values.
    public static func makeDefaultSessionManager() -> HTTPSessionManager {
        let manager = HTTPSessionManager(baseURL: nil)
        manager.responseSerializer = ImageResponseSerializer()
        return manager
    }

    /// The credential answering HTTP Basic challenges (a 401 offering Basic) of this
    /// downloader's transfers; nil (the default) lets such a 401 fail the download.
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
                guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodHTTPBasic,
                      challenge.previousFailureCount == 0, let credential = self?.credential
                else { return .performDefaultHandling }
                return .useCredential(credential)
            }
        }
    }
}
