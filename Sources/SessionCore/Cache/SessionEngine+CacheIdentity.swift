import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Security
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Whose answer the response cache gives (Docs/SessionCore.md, "Whose answer"): the identity a
/// request speaks for, the route it takes, and the trust its server was admitted under. A
/// stored answer is reused only where all three are the same.
extension SessionEngine {
    /// The identity `request` (as sent: `sentFields`) carries, with the jar's cookies when
    /// libcurl's cookie engine adds them (cookies on, no `Cookie` header of the caller's) and
    /// the manager's client certificate.
    func cacheIdentity(for request: URLRequest) -> CacheIdentity {
        let jarAddsCookies = cookieShare != nil && request.httpShouldHandleCookies
            && request.value(forHTTPHeaderField: "Cookie") == nil
        return CacheIdentity(
            request: request, jarCookies: jarAddsCookies ? configuration.cookieJar?.cookies : nil,
            clientCertificate: configuration.clientCertificate, proxyIdentity: cacheProxyIdentity,
            route: Self.route(of: request, in: configuration))
    }

    /// Where the manager sends `request` when that is not where its URL says: its Unix
    /// socket, or the host overrides for the URL's host and port. Managers sharing a cache
    /// (or a cache directory) may send one URL to different servers; an answer from one is no
    /// answer for the other. nil when the URL's own host is asked.
    static func route(of request: URLRequest, in configuration: SessionConfiguration) -> String? {
        var parts: [String] = []
        if let socket = configuration.unixSocketPath { parts.append("unix=\(socket)") }
        if !configuration.hostOverrides.isEmpty, let url = request.url, var host = url.host?.lowercased() {
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
            for override in configuration.hostOverrides where override.port == port {
                var name = override.host.lowercased()
                if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
                if name == host { parts.append(override.description) }
            }
        }
        return parts.isEmpty ? nil : parts.joined(separator: "\n")
    }

    /// Whom the manager's proxy knows its requests as: the configured proxy credential and
    /// the user in the proxy's URL (set outright, or in the environment's variables when the
    /// manager was made), which libcurl sends as `Proxy-Authorization` on every proxied
    /// request. nil when requests go direct or the proxy is given no credential. A proxy may
    /// answer (or let through) one account's requests and not another's: their answers are
    /// different users'. It counts for every request a proxy may carry; for one the bypass
    /// list sends direct, counting it costs at most a miss.
    static func proxyIdentity(of configuration: SessionConfiguration, environmentNamesProxy: Bool) -> String? {
        var parts: [String] = []
        func appendUser(of proxy: String, as label: String) {
            guard let url = SessionConfiguration.Proxy.url(of: proxy), url.user != nil || url.password != nil else { return }
            parts.append("\(label)=\(url.user ?? ""):\(url.password ?? "")")
        }
        switch configuration.proxy {
        case .none:
            return nil
        case .environment:
            guard environmentNamesProxy else { return nil }
            for name in environmentProxyVariables {
                if let value = getenv(name) { appendUser(of: String(cString: value), as: name) }
            }
        case .url(let proxy):
            appendUser(of: proxy, as: "url")
        }
        if let credential = configuration.proxyCredential {
            parts.append("credential=\(credential.user ?? ""):\(credential.password ?? "")")
        }
        return parts.isEmpty ? nil : parts.joined(separator: "\n")
    }

    /// The trust a request is admitted under now (`CacheTrust`): for `https`, and for an
    /// `http` request that libcurl's HSTS cache may send as `https` or that goes through a
    /// pinned HTTPS proxy (`proxyPinningPolicy`); nil for any other. Computed once per policy
    /// generation (it hashes every pinned and root certificate).
    func cacheTrust(for request: URLRequest) -> CacheTrust? {
        switch request.url?.scheme?.lowercased() {
        case "https": break
        case "http":
            let mayUpgrade = cookieShare?.sharesHSTS ?? NetworkOptions.sharesHSTS(configuration)
            guard mayUpgrade || configuration.proxyPinningPolicy != nil else { return nil }
        default: return nil
        }
        let generation = security.tag
        if let known = cacheTrustMemo.withLock({ $0 }), known.generation == generation { return known }
        let snapshot = security.snapshot(certificateAuthorityFile: configuration.certificateAuthorityFile)
        let trust = CacheTrust(
            generation: snapshot.tag,
            tag: CacheTrust.tag(
                policy: snapshot.policy, pinning: configuration.pinningPolicy, proxyPinning: configuration.proxyPinningPolicy))
        cacheTrustMemo.withLock { $0 = trust }
        return trust
    }
}
