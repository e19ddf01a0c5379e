import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The downloader's HTTP credentials and what each is for. A plain value, kept under the
/// downloader's lock.
///
/// Images come from anywhere (user content, CDNs, redirects), so a credential answers only
/// the protection spaces it was bound to. The one credential set without an origin (the
/// ``ImageDownloader/credential`` property) binds itself to one origin at its first use: the
/// https origin of the first transfer whose own request it answers. From then on it answers
/// that origin only, like a bound one; it never answers a cleartext challenge, nor a
/// challenge on a hop a redirect led to before it is bound.
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

    /// The `credential` property: offered over https to ``unboundOrigin`` only, or, before
    /// that is known, to the first challenge on a transfer's own origin (see
    /// ``answer(_:requestURL:)``). Setting it, even to the same credential, forgets the origin.
    var unbound: URLCredential? {
        didSet {
            unboundOrigin = nil
            revision = UUID()
        }
    }
    /// The origin `unbound` was bound to at its first use; nil until then.
    private(set) var unboundOrigin: String?
    /// Offered to the challenges of their scope only, over http or https.
    private(set) var bound: [Scope: URLCredential] = [:]

    /// Renewed by every change of a credential (set, replaced or removed; binding the unbound
    /// one to its origin is no change): what an image these credentials unlocked is cached
    /// under, so that it answers this downloader's requests only, and only until its
    /// credentials change hands.
    private(set) var revision = UUID()

    /// Whether no credential is set at all.
    var isEmpty: Bool { unbound == nil && bound.isEmpty }

    /// Sets (or, with nil, removes) the credential for `scope`.
    mutating func set(_ credential: URLCredential?, for scope: Scope) {
        bound[scope] = credential
        revision = UUID()
    }

    /// The credential a challenge in `space` would get, without binding anything: the most
    /// specific bound one whose scope covers it, else, for https, the unbound one if it is
    /// bound to `space`'s origin or not bound yet (the first use would bind it there).
    func credential(for space: URLProtectionSpace) -> URLCredential? {
        guard let origin = Self.origin(scheme: space.protocol, host: space.host, port: space.port) else { return nil }
        if let bound = boundCredential(for: space, origin: origin) { return bound }
        guard space.protocol?.lowercased() == "https", let unbound else { return nil }
        return unboundOrigin == nil || unboundOrigin == origin ? unbound : nil
    }

    /// Answers a challenge in `space` on a transfer whose own (first) request went to
    /// `requestURL`: the most specific bound credential, else the unbound one, over https only,
    /// if it is bound to `space`'s origin; not bound yet, it is bound here to that origin, but
    /// only when it is the transfer's own origin (a redirect's target is not an origin the
    /// caller asked for).
    mutating func answer(_ space: URLProtectionSpace, requestURL: URL?) -> URLCredential? {
        guard let origin = Self.origin(scheme: space.protocol, host: space.host, port: space.port) else { return nil }
        if let bound = boundCredential(for: space, origin: origin) { return bound }
        guard space.protocol?.lowercased() == "https", let unbound else { return nil }
        if let unboundOrigin { return unboundOrigin == origin ? unbound : nil }
        guard let requestURL,
              Self.origin(scheme: requestURL.scheme, host: requestURL.host, port: requestURL.port) == origin
        else { return nil }
        unboundOrigin = origin
        return unbound
    }

    /// The most specific bound credential whose scope covers `space`, at `origin`.
    private func boundCredential(for space: URLProtectionSpace, origin: String) -> URLCredential? {
        let method = Self.method(space.authenticationMethod)
        let matching = bound.filter { scope, _ in
            scope.origin == origin
                && (scope.realm == nil || scope.realm == space.realm)
                && (scope.authenticationMethod == nil || scope.authenticationMethod == method)
        }
        return matching.max(by: { $0.key.specificity < $1.key.specificity })?.value
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
