import Foundation

extension SessionConfiguration {
    /// Which IP versions host names resolve to (``SessionConfiguration/addressFamily``,
    /// `CURLOPT_IPRESOLVE`). A restriction, not an order: with `.any`, libcurl tries both
    /// families (Happy Eyeballs, ``SessionConfiguration/happyEyeballsDelay``).
    public enum AddressFamily: Sendable, Hashable {
        /// IPv4 and IPv6 (the default).
        case any
        /// IPv4 addresses only: a name with only IPv6 addresses fails to resolve.
        case ipv4
        /// IPv6 addresses only.
        case ipv6
    }

    /// HTTP Strict Transport Security (RFC 6797) through libcurl's HSTS engine
    /// (``SessionConfiguration/strictTransportSecurity``): once a host answered over https
    /// with `Strict-Transport-Security: max-age=N`, every `http://` URL to it (and, with
    /// `includeSubDomains`, to its subdomains) is sent as `https://` for N seconds, before
    /// any byte goes out in the clear; `max-age=0` ends it. An explicit port other than 80
    /// is kept (RFC 6797 8.3). IP address hosts are never upgraded.
    ///
    /// The cache lives in the share handle the manager's transfers join: the manager's own
    /// one, or the cookie jar's when the manager made its jar itself. libcurl 7.88 cannot
    /// share an HSTS cache between threads, so a manager given a ``CookieJar`` in its
    /// configuration (which other managers may use too) keeps no HSTS cache: there, HSTS is
    /// off. For the same reason, another manager given an HSTS manager's own jar
    /// (`URLSessionManager.cookieJar`) fails each task with `SessionError.invalidConfiguration`. A security policy change that replaces the session caches
    /// (`replacesSessionCacheOnPolicyChange`) starts an empty HSTS cache too.
    public enum StrictTransportSecurity: Sendable, Hashable {
        /// No HSTS: `http://` URLs are always sent as written (the default).
        case disabled
        /// HSTS remembered in memory for the manager's life.
        case inMemory
        /// HSTS remembered in memory, read from this file (libcurl's HSTS cache format) by
        /// the manager's first transfer and written back to it, atomically, when the manager
        /// is invalidated (libcurl may also write it when it frees a connection handle that
        /// still uses the cache). A missing file is an empty cache.
        case file(String)
    }

    /// Alt-Svc (RFC 7838) through libcurl's engine (``SessionConfiguration/alternativeServices``,
    /// `CURLOPT_ALTSVC_CTRL`): an `Alt-Svc` header received over https lets later requests to
    /// that origin connect to the advertised host and port (HTTP/1.1 or HTTP/2; this libcurl has
    /// no HTTP/3). The certificate is still checked against the URL's host. libcurl keeps the
    /// cache per connection handle, not per manager, so a pooled handle that has not seen the
    /// header yet connects to the origin itself.
    public enum AlternativeServices: Sendable, Hashable {
        /// Alt-Svc headers are ignored (the default).
        case disabled
        /// Alternatives are remembered in memory.
        case inMemory
        /// Alternatives are loaded from and saved to this file (libcurl's alt-svc cache format)
        /// as each connection handle is created and freed.
        case file(String)
    }

    /// Whether this process's libcurl can use ``SessionConfiguration/dnsServers``: true only
    /// when it was built with c-ares (`curl_version_info`'s `ares`). Debian's libcurl uses
    /// its threaded resolver: false.
    public static var supportsDNSServers: Bool { CurlRuntime.supportsDNSServers }
}
