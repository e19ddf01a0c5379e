import Foundation

extension ConnectivityWait {
    /// Where an attempt's connection went, for the wait after it failed: what libcurl connects
    /// to for a URL, given the manager's proxy, bypass list and host overrides.
    struct Routes {
        /// How libcurl picks the proxy for a request.
        let proxies: ProxyChoice
        /// `SessionConfiguration.hostOverrides`.
        let overrides: [HostOverride]
        /// Requests go over a Unix domain socket: no route leads anywhere, and libcurl uses no
        /// proxy then.
        let viaUnixSocket: Bool

        /// The routes a failed attempt for `url` may have wanted: the proxy's when the request
        /// goes through one (the only host libcurl connects to; a `.resolve` override for the
        /// proxy's host and port counts), else the origin's, after a `.connect` override
        /// (its first entry for the host and port, as libcurl reads the list) and a `.resolve`
        /// override (its last entry: each replaces the one before in libcurl's DNS cache). When
        /// HSTS may have sent an http URL as https and which it did is not known
        /// (`mayBecomeHTTPS`), the https request's routes count too: under `.environment`
        /// another variable may name its proxy, and the port an override is for changes. Empty
        /// when there is nothing to watch.
        func targets(for url: URL?, mayBecomeHTTPS: Bool, environment: (String) -> String? = ProxyChoice.processEnvironment)
            -> [Target]
        {
            guard !viaUnixSocket, let url, let scheme = url.scheme?.lowercased(), let rawHost = url.host, !rawHost.isEmpty else {
                return []
            }
            let host = ProxyBypassList.unbracketed(rawHost)
            var schemes = [scheme]
            if mayBecomeHTTPS, scheme == "http" { schemes.append("https") }
            var targets: [Target] = []
            for scheme in schemes {
                let found: [Target]
                if let proxy = proxies.proxy(scheme: scheme, host: host, environment: environment) {
                    // A proxy libcurl cannot parse or does not connect through fails the
                    // request for that reason: no route is wanted.
                    guard ProxyChoice.connectableSchemes.contains(ProxyChoice.scheme(ofProxy: proxy)),
                        let proxyURL = SessionConfiguration.Proxy.url(of: proxy), let proxyHost = proxyURL.host, !proxyHost.isEmpty
                    else { continue }
                    // libcurl's defaults: 443 for an https proxy, 1080 for every other kind.
                    let port = proxyURL.port ?? (proxyURL.scheme?.lowercased() == "https" ? 443 : 1080)
                    found = addresses(of: ProxyBypassList.unbracketed(proxyHost), port: port, followsConnectOverride: false)
                } else {
                    let port = url.port ?? (scheme == "https" ? 443 : 80)
                    found = addresses(of: host, port: port, followsConnectOverride: true)
                }
                for target in found where !targets.contains(target) { targets.append(target) }
            }
            return targets
        }

        /// The targets for connecting to `host` on `port`: an override's addresses, or the
        /// host's own target. `.connect` overrides apply to the origin only (libcurl connects
        /// to a proxy itself, and tunnels to the override's host through it).
        private func addresses(of host: String, port: Int, followsConnectOverride: Bool) -> [Target] {
            var host = host
            var port = port
            if followsConnectOverride, let redirect = overrides.first(where: { Self.applies($0, to: host, port: port, connect: true) }),
                case .connect(let targetHost, let targetPort) = redirect.kind
            {
                host = ProxyBypassList.unbracketed(targetHost)
                port = targetPort
            }
            if let pinned = overrides.last(where: { Self.applies($0, to: host, port: port, connect: false) }),
                case .resolve(let addresses) = pinned.kind
            {
                var targets: [Target] = []
                for address in addresses.map(Target.init(host:)) where !targets.contains(address) { targets.append(address) }
                return targets
            }
            return [Target(host: host)]
        }

        /// `targets` with the address libcurl last tried to connect to (`CURLINFO_PRIMARY_IP`)
        /// beside the default route a host name stands for: the name resolved, so whether a
        /// route leads to that address is known. Judged by the default route alone, a refusal
        /// on a network without one (a LAN whose only way out is its proxy, an internal
        /// container network) waited for a default route that never comes, until the resource
        /// timeout, though the route to the host was there. The wait goes on only while every
        /// target is missing.
        static func adding(tried: String?, to targets: [Target]) -> [Target] {
            guard targets.contains(.defaultRoute), let tried, !tried.isEmpty else { return targets }
            let address = Target(host: tried)
            guard address != .defaultRoute, !targets.contains(address) else { return targets }
            return targets + [address]
        }

        private static func applies(_ override: HostOverride, to host: String, port: Int, connect: Bool) -> Bool {
            switch override.kind {
            case .connect: guard connect else { return false }
            case .resolve: guard !connect else { return false }
            }
            return override.port == port && ProxyBypassList.unbracketed(override.host).caseInsensitiveCompare(host) == .orderedSame
        }
    }
}
