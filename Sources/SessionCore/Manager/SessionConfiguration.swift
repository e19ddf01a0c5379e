import Foundation
import Logging
import Security
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The settings a `URLSessionManager` applies to every transfer.
///
/// A plain value: `SessionConfiguration.default` is a fresh copy each time, and changing a
/// copy never affects a manager that was already created with it.
public struct SessionConfiguration: Sendable {
    /// HTTP protocol versions Curlew may negotiate.
    public enum HTTPVersion: Sendable, Hashable {
        /// HTTP/1.1 only.
        case http1_1
        /// HTTP/2 over TLS when the server offers it through ALPN, HTTP/1.1 otherwise (the default).
        case http2
        /// HTTP/2 without negotiation, also over cleartext. libcurl before 8.0 (Debian 12 has
        /// 7.88.1) breaks a prior-knowledge connection it reuses (curl #10634), so with such a
        /// libcurl every request in this mode gets a connection of its own: correct, but
        /// without HTTP/2's multiplexing. Prefer `.http2` over TLS there.
        case http2PriorKnowledge
    }

    /// Which proxy transfers go through.
    public enum Proxy: Sendable, Hashable {
        /// The process environment decides (`http_proxy`, `https_proxy`, `all_proxy`,
        /// `no_proxy`), as curl does. A manager made while none of the proxy variables is set
        /// uses no proxy for its whole life, like a `URLSession` that read its proxy settings
        /// when it was created.
        case environment
        /// Never use a proxy, whatever the environment says.
        case none
        /// Always use this proxy URL, e.g. `http://proxy.internal:3128` or `socks5h://127.0.0.1:1080`
        /// (a `no_proxy` in the environment does not apply to it).
        case url(String)

        /// Whether Curlew talks TLS to the proxy itself (an `https://` proxy URL).
        var isHTTPS: Bool {
            guard case .url(let proxy) = self else { return false }
            return proxy.lowercased().hasPrefix("https:")
        }

        /// A proxy as libcurl reads it from `CURLOPT_PROXY` or a proxy variable: a URL, or
        /// `host:port` (or `user:password@host:port`) without a scheme, which means http.
        static func url(of text: String) -> URL? {
            URL(string: text.contains("://") ? text : "http://" + text)
        }
    }

    /// Minimum TLS protocol versions.
    public enum TLSVersion: Sendable, Hashable, Comparable {
        /// TLS 1.2.
        case tls1_2
        /// TLS 1.3.
        case tls1_3
    }

    /// A fresh configuration with Curlew's defaults.
    public static var `default`: SessionConfiguration { SessionConfiguration() }

    /// Idle timeout: a task fails with `.timedOut` when no byte moved in either direction for
    /// this long (connecting included), checked to within 50 ms. A request's own
    /// `timeoutInterval`, when it differs from `URLRequest`'s 60-second default, overrides it.
    /// The clock stops while the task is suspended or its data handler holds the transfer
    /// paused, and while a request body streamed from the caller (an `InputStream`, an async
    /// sequence) has nothing ready before the server answered: the server is then waiting for
    /// the caller, not silent. `0`, a negative value, `.infinity` or more than a century mean
    /// no limit.
    /// Default: 60 s.
    public var timeoutIntervalForRequest: TimeInterval = 60
    /// Total time a task may take, redirects, uploads and hook decisions included.
    /// `0`, a negative value, `.infinity` or more than a century mean no limit.
    /// Default: 7 days, as URLSession.
    public var timeoutIntervalForResource: TimeInterval = 7 * 24 * 3600
    /// Headers added to every request that does not set them itself.
    public var httpAdditionalHeaders: [String: String] = [:]
    /// The most connections opened to one host at a time (`CURLMOPT_MAX_HOST_CONNECTIONS`);
    /// further transfers to that host wait for a free connection. `0` means no limit. Default: 6.
    /// Idle connections are kept for the next requests: up to four per transfer the manager has
    /// held at once at its busiest, at least 64 (Docs/SessionCore.md, "Priority and connections").
    public var httpMaximumConnectionsPerHost: Int = 6
    /// The most connections open in total (`CURLMOPT_MAX_TOTAL_CONNECTIONS`); `0` means no limit.
    public var httpMaximumConnections: Int = 0
    /// Whether cookies are sent with requests and responses' `Set-Cookie` headers stored (in
    /// ``cookieJar``). A request whose `httpShouldHandleCookies` is false sends and stores none;
    /// one that sets its own `Cookie` header is sent with that header alone. Default: true.
    public var httpShouldSetCookies: Bool = true
    /// The jar cookies are kept in while ``httpShouldSetCookies`` is on: libcurl's RFC 6265
    /// cookie engine, with public-suffix checks.
    ///
    /// `nil` (the default): each manager creates a jar of its own when it is created, so two
    /// managers never share cookies unless they are given the same jar here. The manager's
    /// jar is `URLSessionManager.cookieJar` (and its `configuration.cookieJar`).
    public var cookieJar: CookieJar?
    /// Which HTTP versions may be negotiated. Default: `.http2`.
    public var httpVersion: HTTPVersion = .http2
    /// The proxy to use. Default: `.environment`.
    ///
    /// Credentials may be part of the proxy URL (`http://user:password@proxy:3128`) or given
    /// as ``proxyCredential``. An `https://` proxy's own certificate is verified against the system's
    /// certificate authorities (and ``certificateAuthorityFile``) by libcurl: the manager's
    /// `SecurityPolicy` and its pins apply to the origin server only (``proxyPinningPolicy``
    /// pins the proxy).
    public var proxy: Proxy = .environment
    /// The user and password sent to the proxy, with Basic authentication from the first
    /// request (no 407 round trip per request).
    /// `nil`: none, or those in the proxy URL.
    public var proxyCredential: URLCredential?
    /// Hosts reached directly, never through the proxy, in libcurl's `NOPROXY` syntax: host
    /// names and domains (`example.com` also covers its subdomains), IP addresses, CIDR ranges
    /// (`10.0.0.0/8`), or `*` for every host. Applies to ``Proxy/url(_:)`` proxies and, when not
    /// empty, replaces the environment's `no_proxy` for ``Proxy/environment``. Default: empty.
    ///
    /// IPv6 addresses and ranges may be written with or without brackets (`[::1]`, `fd00::/8`)
    /// and match the address in any spelling; Curlew matches them itself, since libcurl 7.88
    /// matches none. `*` anywhere in the list bypasses the proxy for every host.
    public var proxyBypassList: [String] = []
    /// Connect over this Unix domain socket instead of TCP (the URL still names host and path).
    public var unixSocketPath: String?
    /// The lowest TLS version accepted. Default: TLS 1.2.
    public var tlsMinimumVersion: TLSVersion = .tls1_2
    /// The most redirects followed before a task fails with `.tooManyRedirects`. Default: 16.
    public var maximumRedirects: Int = 16
    /// Whether a request that fails for want of a route to its host (no network, an
    /// interface down) waits for one instead of failing at once, as URLSession's
    /// `waitsForConnectivity`: Reachability's rtnetlink monitor watches the routing table, an
    /// `EventMonitor` hears `taskIsWaitingForConnectivity`, and the request is sent again when a
    /// route appears. The wait holds no connection slot and no idle timeout runs; the resource
    /// timeout (`timeoutIntervalForResource`) bounds it. A failure with a route in place (a
    /// refused connection, an unknown host while the network is up) fails as before. The route
    /// judged is the one to the host libcurl connects to: the proxy's when the request goes
    /// through one (``proxy``, ``proxyBypassList`` or `no_proxy`, as libcurl picks it), else
    /// the origin's after ``hostOverrides``. For an address literal, the route to it;
    /// `localhost` (and `*.localhost`) is the loopback address; any other host name is judged
    /// by the default route; a request over `unixSocketPath` never waits. A connection lost
    /// after the request went out waits only for an idempotent method (GET, HEAD, PUT, DELETE,
    /// OPTIONS, TRACE): a POST the server may have acted on goes to the retrier instead.
    public var waitsForConnectivity = false
    /// The largest response head accepted, in bytes; a larger one fails with
    /// `.responseHeadersTooLarge`. Default: 256 KiB.
    ///
    /// libcurl caps a response's header block itself, at 300 KiB (307,200 bytes) in the
    /// versions Debian ships, so a value above that acts as libcurl's cap: such a head fails
    /// with `.responseHeadersTooLarge(limit: 307200)`, libcurl's limit as it reports it.
    public var maximumResponseHeaderBytes: Int = 256 * 1024
    /// The largest response body, in bytes, kept in memory for a task that collects its body
    /// (a data or upload task's `data`, `data(for:)`, the serializers, the image downloader);
    /// `0` or negative: no limit (the default, as URLSession has none). A body announced
    /// larger (`Content-Length`) fails the task with `.responseBodyTooLarge` before any of it
    /// is read, and one that grows past the limit (chunked, or decoded from a content coding,
    /// whose decoded bytes are counted) fails as soon as it does; the connection is closed.
    /// Bodies that go to a data handler, a `bytes(for:)` consumer or a file are not counted,
    /// nor one a response hook may turn into a download until it decided.
    public var maximumCollectedBodyBytes: Int = 0
    /// The largest ratio of decoded to received body bytes accepted for a compressed response
    /// (`Content-Encoding`); a larger one fails with `.decompressionLimitExceeded`.
    /// The first `decompressionAllowance` bytes are always accepted. Default: 100.
    /// A chunked body is judged while it arrives against one read (`receiveBufferSize`) more
    /// than libcurl has counted, since libcurl counts a read only after decoding it, and
    /// against all it received when it ends: up to this limit times one read (about 51 MB
    /// for a download's 512 KiB) may be decoded, and handed to a stream or written to a file,
    /// before a chunked bomb that came in that read is refused.
    public var decompressionLimit: Int = 100
    /// Decoded bytes always accepted before `decompressionLimit` applies. Default: 1 MiB.
    public var decompressionAllowance: Int = 1 << 20
    /// Receive buffer per transfer (`CURLOPT_BUFFERSIZE`). `nil`: 64 KiB for data tasks
    /// (16 KiB on HTTP/2, which libcurl reads through a connection buffer of its own),
    /// 16 KiB for uploads (whose answers are small) and 512 KiB for downloads, the sizes
    /// measured best on Linux (see Docs/Performance.md). Sizes are kept between 16 KiB
    /// (libcurl's default: libcurl 7.88 cannot always shrink a handle's buffer safely) and 10 MiB.
    public var receiveBufferSize: Int?
    /// The HTTP response cache GET data tasks consult and fill (see `ResponseCache`). One
    /// shared between managers follows RFC 9111's shared-cache rules (no `private` responses);
    /// one manager's own cache is its private cache. `nil` (the default): no caching.
    public var responseCache: ResponseCache?
    /// Where download tasks write their body while it arrives (and where resume data's
    /// partial files stay). `nil`: the system's temporary directory (`TMPDIR`, else /tmp).
    /// On the same file system as your destinations, the final move is a rename.
    public var downloadDirectory: URL?
    /// Extra certificate authorities file (PEM) trusted in addition to the system store.
    /// `nil`: the system bundle only. A server's chain is checked against the file's
    /// certificates first, and against the system store (read once per process) only when
    /// they do not anchor it, so a server under your own CA never costs the system's roots.
    /// Applies while the security policy uses the system store (no `trustedRootCertificates`).
    public var certificateAuthorityFile: String?
    /// The certificate presented to servers that ask for one (mutual TLS). `nil`: none.
    public var clientCertificate: ClientCertificate?
    /// Per-host public-key pins, checked inside every TLS handshake with an origin server
    /// (also behind an HTTPS proxy) after the manager's `SecurityPolicy` accepted the chain:
    /// pins add to that trust, they never replace it. A refused handshake fails the task with
    /// `SessionError.serverTrustEvaluationFailed` (reason `.noPinMatched`) before any request
    /// byte is sent, and no challenge handler can overrule it (nor waive the host name of a
    /// host under enforced pins: a leaf a handler trusts must still name it). Kept-alive connections and
    /// resumed TLS sessions are only used when a handshake of this manager accepted them.
    /// `nil` (the default): no per-host pins.
    public var pinningPolicy: PinningPolicy?
    /// Per-host pins for an `https://` proxy's own certificate (its host is the proxy's),
    /// checked after the proxy's chain verified against the system authorities and
    /// ``certificateAuthorityFile``; the origin behind the proxy is judged by ``pinningPolicy``.
    /// While it is set, TLS sessions are not resumed, so each new proxy connection makes a
    /// full handshake that the pins see. `nil` (the default): no proxy pins.
    public var proxyPinningPolicy: PinningPolicy?
    // MARK: Rates, name resolution, local address, HSTS and alt-svc (libcurl's own engines;
    // Docs/SessionCore.md, "Rates, names and addresses")

    /// The most response bytes per second each transfer receives
    /// (`CURLOPT_MAX_RECV_SPEED_LARGE`). A cap per transfer, not for the manager as a whole:
    /// libcurl paces every transfer on its own, so ten parallel transfers may receive ten
    /// times this. A task may lower it (`SessionTask.maximumReceiveRate`). `0`, a negative
    /// value, `.infinity` or NaN: no cap (the default).
    public var maximumReceiveRate: Double = 0
    /// The most request body bytes per second each transfer sends
    /// (`CURLOPT_MAX_SEND_SPEED_LARGE`); per transfer, like ``maximumReceiveRate``. A task may
    /// lower it (`SessionTask.maximumSendRate`), and so does a multipart body's
    /// `throttleBandwidth(withPacketSize:delay:)`. `0`, negative, `.infinity` or NaN: no cap.
    public var maximumSendRate: Double = 0
    /// Host names answered or routed by the manager instead of DNS: "send requests for
    /// api.example.com:443 to 127.0.0.1:8443" (`CURLOPT_RESOLVE`, `CURLOPT_CONNECT_TO`).
    /// The URL, `Host` header, TLS server name and certificate check stay those of the URL.
    /// Default: none.
    public var hostOverrides: [HostOverride] = []
    /// The local interface or address connections are made from (`CURLOPT_INTERFACE`).
    /// `nil` (the default): the system chooses.
    public var localEndpoint: LocalEndpoint?
    /// Which IP versions names resolve to (`CURLOPT_IPRESOLVE`). Default: `.any`.
    public var addressFamily: AddressFamily = .any
    /// How long a connection attempt to the first address family gets before the other one
    /// is tried in parallel (Happy Eyeballs, `CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS`).
    /// `nil`: libcurl's 200 ms. Values are clamped to 0...60 s.
    public var happyEyeballsDelay: TimeInterval?
    /// How long a resolved name is reused (`CURLOPT_DNS_CACHE_TIMEOUT`). `nil`: libcurl's
    /// 60 s; `0`: never cached; a negative value or `.infinity`: cached for the manager's life.
    public var dnsCacheLifetime: TimeInterval?
    /// DNS servers used instead of the system's (`CURLOPT_DNS_SERVERS`). Only a libcurl built
    /// with c-ares can do this (``SessionConfiguration/supportsDNSServers``); with any other
    /// (Debian's uses its threaded resolver), every task of a manager given servers fails
    /// with `SessionError.invalidConfiguration` rather than silently using the system's.
    /// Default: none (the system's resolver).
    public var dnsServers: [DNSServer] = []
    /// HTTP Strict Transport Security through libcurl's HSTS engine. Default: `.disabled`:
    /// with HSTS on, every `http://` request carries the TLS policy in case libcurl upgrades
    /// it, which costs plain-http requests their cheap handle reuse.
    public var strictTransportSecurity: StrictTransportSecurity = .disabled
    /// Alt-Svc through libcurl's engine (`CURLOPT_ALTSVC_CTRL`). Default: `.disabled`.
    public var alternativeServices: AlternativeServices = .disabled

    /// Whether this manager's tasks post `taskDidResume`, `taskDidSuspend` and
    /// `taskDidComplete` (with its `userInfo`) to `NotificationCenter.default`, as
    /// AFNetworking's do. Default: `true`.
    ///
    /// Posting costs every request whether or not anything observes: building the
    /// completion's `userInfo` and Foundation's two posts are the largest single cost a
    /// request has after libcurl (Docs/Performance.md, "Eleventh pass": 2–8% of requests per
    /// second at 64 in flight and up to 10% one at a time, between runs of the benchmark).
    /// An app that does not observe them can turn them off. Curlew's own observers keep
    /// working: while a ``NetworkActivityIndicatorManager`` is enabled every manager posts, and
    /// a task bound to a control (`setRefreshingWithStateOfTask(_:on:)` and the like) posts its
    /// own. `sessionDidInvalidate` and the download file notifications are always posted; hooks
    /// and `EventMonitor`s are not affected.
    public var postsTaskNotifications = true

    /// Where the engine writes its own debug messages: its driver thread starting and
    /// stopping, transfers waiting for a connection slot, retries. Written at `.debug`, never
    /// from the driver thread. `nil` (the default): silent. For one line per request, give
    /// the manager a `LoggingEventMonitor`.
    public var logger: Logger?

    /// Creates a configuration with Curlew's defaults.
    public init() {}
}
