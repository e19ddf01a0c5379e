import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The downloader's HTTP credentials and what each is for. A plain value, kept under the
/// downloader's lock.
///
/// Images come from anywhere (user content, CDNs, redirects), so a credential answers only
/// the protection spaces it was bound to; the one credential that is bound to nothing (the
/// ``ImageDownloader/credential`` property) answers https challenges only, never a
/// cleartext one.
struct ImageDownloadCredentials: Sendable {
    /// What a bound credential answers: one origin, and optionally one realm and one
    /// authentication method (nil: any).
    struct Scope: Hashable, Sendable {
        /// `scheme://host:port`, lowercased, the port always written out.
        let origin: String
        let realm: String?
        let authenticationMethod: String?

        /// How many optional parts are set: the most specific match wins.
        var specificity: Int { (realm == nil ? 0 : 1) + (authenticationMethod == nil ? 0 : 1) }
    }

    /// Offered to https challenges of any origin (the `credential` property).
    var unbound: URLCredential?
    /// Offered to the challenges of their scope only, over http or https.
    private(set) var bound: [Scope: URLCredential] = [:]

    /// Whether no credential is set at all.
    var isEmpty: Bool { unbound == nil && bound.isEmpty }

    /// Sets (or, with nil, removes) the credential for `scope`.
    mutating func set(_ credential: URLCredential?, for scope: Scope) {
        bound[scope] = credential
    }

    /// The credential for a challenge in `space`: the most specific bound one whose scope
    /// covers it, else the unbound one if `space` is https.
    func credential(for space: URLProtectionSpace) -> URLCredential? {
        guard let origin = Self.origin(scheme: space.protocol, host: space.host, port: space.port) else { return nil }
        let method = Self.method(space.authenticationMethod)
        let matching = bound.filter { scope, _ in
            scope.origin == origin
                && (scope.realm == nil || scope.realm == space.realm)
                && (scope.authenticationMethod == nil || scope.authenticationMethod == method)
        }
        if let best = matching.max(by: { $0.key.specificity < $1.key.specificity }) { return best.value }
        return space.protocol?.lowercased() == "https" ? unbound : nil
    }

    /// `scheme://host:port` for an http or https origin (default ports filled in), nil for
    /// anything else: a credential is bound to a web origin or to nothing.
    static func origin(scheme: String?, host: String?, port: Int?) -> String? {
        guard let scheme = scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = host?.lowercased(), !host.isEmpty
        else { return nil }
        let port = port.flatMap { $0 > 0 ? $0 : nil } ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }

    /// An authentication method to match on: nil (any HTTP method) for Foundation's
    /// "default" method, which stands for whatever the server asks.
    static func method(_ method: String) -> String? {
        method == NSURLAuthenticationMethodDefault ? nil : method
    }
}
