import Foundation
import SessionCore
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// HTTP Basic and Digest credentials, bound to the origins they are for.
///
/// Images come from anywhere (user content, CDNs, redirects): a password must never reach a
/// host that merely answers `401`. A credential set with ``setCredential(_:for:realm:)`` (or
/// ``setCredential(_:for:)`` with a protection space) answers that origin only; the
/// ``credential`` set without an origin binds itself to the first https origin it answers.
extension ImageDownloader {
    /// A credential set without naming its origin, offered **over https only** and to **one
    /// origin only**: the origin of the first transfer whose HTTP Basic or Digest challenge
    /// (a 401 offering either) it answers. It binds itself to that origin at that moment, and
    /// from then on every other origin's 401 fails its download as if no credential were set.
    /// nil (the default) lets every such 401 fail the download.
    ///
    /// It binds only to a transfer's own origin, the one the request was sent to (after the
    /// manager's `RequestAdapter`): a 401 on a hop a redirect led to never binds it, and
    /// receives it only when that hop is on the origin it is already bound to. A challenge
    /// over cleartext http never receives it. Setting this property (even to the same
    /// credential) forgets the origin; ``credential(for:)`` tells where it would be offered now.
    ///
    /// Prefer ``setCredential(_:for:realm:)`` whenever you know the origin: when image URLs
    /// come from content you do not control, the first https origin to challenge would take
    /// this credential (and the one it is meant for would then get none). A bound credential
    /// takes precedence over this one.
    ///
    /// Behaviour changes: before issue 19 this credential was offered to any origin's 401,
    /// over http too; after it, to any https origin's 401.
    ///
    /// Setting a credential (this one or a bound one) the first time installs the
    /// downloader's challenge handler on ``sessionManager``; see ``setCredential(_:for:realm:)``.
    public var credential: URLCredential? {
        get { state.withLock { $0.credentials.unbound } }
        set {
            let install = state.withLock { state -> Bool in
                state.credentials.unbound = newValue
                return state.needsChallengeHandler()
            }
            if install { installChallengeHandler() }
        }
    }

    /// Binds `credential` to `origin` (its scheme, host and port; the path is ignored) and,
    /// when given, to one `realm`: it answers the HTTP Basic and Digest challenges of that
    /// origin's transfers only, over http as well as https. Pass nil to remove the
    /// credential bound to exactly that origin and realm.
    ///
    /// For a challenge, the credential bound to its origin and realm is used, else the one
    /// bound to its origin without realm, else (https only) ``credential``. The credential is
    /// offered once per transfer, so a wrong one ends in the 401, not a loop; a redirect to
    /// another origin is answered by that origin's credential, if any. The downloader keeps
    /// its credentials itself (it hands them to the manager with `.none` persistence): a
    /// change takes effect at the next challenge. An image a credential unlocked is cached for
    /// this downloader and its credentials as they are: after any change of a credential it is
    /// asked for again (Docs/ImageLoading.md, "The cache").
    ///
    /// Setting a credential the first time installs the downloader's challenge handler on
    /// ``sessionManager`` (replacing any handler set there before; give the downloader a
    /// manager of its own if you need a handler of yours). Server trust challenges keep their
    /// default handling.
    ///
    /// - Throws: `URLError(.badURL)` when `origin` is not an http or https URL with a host.
    public func setCredential(_ credential: URLCredential?, for origin: URL, realm: String? = nil) throws {
        guard let key = ImageDownloadCredentials.origin(scheme: origin.scheme, host: origin.host, port: origin.port) else {
            throw URLError(.badURL, userInfo: [NSURLErrorFailingURLErrorKey: origin])
        }
        bind(credential, to: ImageDownloadCredentials.Scope(origin: key, realm: realm, authenticationMethod: nil))
    }

    /// Binds `credential` to one protection space: its protocol (http or https), host and
    /// port, its realm if it has one, and its authentication method (Basic or Digest;
    /// `NSURLAuthenticationMethodDefault` matches both). Otherwise as
    /// ``setCredential(_:for:realm:)``; nil removes the credential bound to exactly that space.
    ///
    /// - Throws: `URLError(.badURL)` when the space's protocol is not http or https, or it has
    ///   no host.
    public func setCredential(_ credential: URLCredential?, for protectionSpace: URLProtectionSpace) throws {
        guard let key = ImageDownloadCredentials.origin(
            scheme: protectionSpace.protocol, host: protectionSpace.host, port: protectionSpace.port)
        else { throw URLError(.badURL) }
        bind(credential, to: ImageDownloadCredentials.Scope(
            origin: key, realm: protectionSpace.realm,
            authenticationMethod: ImageDownloadCredentials.method(protectionSpace.authenticationMethod)))
    }

    /// The credential the downloader would offer to a challenge in `protectionSpace` (nil:
    /// none, the 401 is delivered). Asking binds nothing: an unbound ``credential`` not used
    /// yet is reported for every https space, since a challenge there on a transfer's own
    /// origin would get it (and bind it there).
    public func credential(for protectionSpace: URLProtectionSpace) -> URLCredential? {
        state.withLock { $0.credentials.credential(for: protectionSpace) }
    }

    // MARK: Internals

    private func bind(_ credential: URLCredential?, to scope: ImageDownloadCredentials.Scope) {
        let install = state.withLock { state -> Bool in
            state.credentials.set(credential, for: scope)
            return state.needsChallengeHandler()
        }
        if install { installChallengeHandler() }
    }

    /// Answers HTTP challenges from the downloader's credentials. Installed once, when the
    /// first credential is set; with none left it answers nothing.
    private func installChallengeHandler() {
        // Weak: the manager keeps its handler; the handler must not keep the downloader.
        sessionManager.setAuthenticationChallengeHandler { [weak self] task, challenge in
            let space = challenge.protectionSpace
            let method = space.authenticationMethod
            guard method == NSURLAuthenticationMethodHTTPBasic || method == NSURLAuthenticationMethodHTTPDigest,
                  challenge.previousFailureCount == 0,
                  let credential = self?.state.withLock({
                      $0.credentials.answer(space, requestURL: task.originalRequest?.url)
                  }),
                  let user = credential.user, let password = credential.password
            else { return .performDefaultHandling }
            // `.none`: the manager must not remember it for the space and answer later
            // challenges there itself; the downloader's own bindings stay the only authority.
            return .useCredential(URLCredential(user: user, password: password, persistence: .none))
        }
    }
}

extension ImageDownloader.State {
    /// Whether a credential is set and the challenge handler is not installed yet; marks it
    /// installed (the caller installs it after unlocking).
    mutating func needsChallengeHandler() -> Bool {
        guard !credentials.isEmpty, !installedChallengeHandler else { return false }
        installedChallengeHandler = true
        return true
    }
}
