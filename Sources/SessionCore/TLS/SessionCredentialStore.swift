import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// HTTP credentials a challenge handler gave with `.forSession` persistence (or `.permanent`
/// and `.synchronizable`, which Linux has no keychain for: they last as long as the
/// manager): answered again without asking the handler, for the same protection space only.
final class SessionCredentialStore: Sendable {
    /// A protection space: origin, realm and scheme, as URLSession keys its credential storage.
    struct Space: Hashable, Sendable {
        let origin: String
        let realm: String?
        let scheme: HTTPAuthenticationScheme

        init(url: URL, realm: String?, scheme: HTTPAuthenticationScheme) {
            let urlScheme = url.scheme?.lowercased() ?? "https"
            let port = URLOrigin.port(of: url, assumedScheme: "https")
            origin = "\(urlScheme)://\(url.host?.lowercased() ?? ""):\(port)"
            self.realm = realm
            self.scheme = scheme
        }
    }

    struct Credential: Sendable {
        let user: String
        let password: String
    }

    private let credentials = Mutex<[Space: Credential]>([:])
    /// Read on the driver for every 401: a lock only once something was stored.
    private let isEmptyFlag = Atomic<Bool>(true)

    var isEmpty: Bool { isEmptyFlag.load(ordering: .acquiring) }

    func credential(for space: Space) -> Credential? {
        isEmpty ? nil : credentials.withLock { $0[space] }
    }

    /// Keeps `credential` for `space` unless its persistence is `.none`.
    func remember(_ credential: URLCredential, for space: Space) {
        guard credential.persistence != .none, let user = credential.user, let password = credential.password else { return }
        credentials.withLock { $0[space] = Credential(user: user, password: password) }
        isEmptyFlag.store(false, ordering: .releasing)
    }

    /// Forgets everything (the manager's reset).
    func removeAll() {
        credentials.withLock { $0.removeAll() }
        isEmptyFlag.store(true, ordering: .releasing)
    }
}
