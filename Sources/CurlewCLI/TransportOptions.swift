import ArgumentParser
import Foundation
import Security
import SessionCore

/// The TLS and network flags, shared by the request commands.
struct TransportOptions: ParsableArguments {
    @Option(name: .customLong("verify"), help: ArgumentHelp(
        "yes (the default), no (trust any certificate and name), or a PEM file of the only roots to trust.",
        valueName: "yes|no|PATH"))
    var verify: String?

    @Option(name: .customLong("pin"), help: ArgumentHelp(
        "Accept the server only if its verified chain has this public key (sha256/BASE64, as `curlew pin` prints). Repeatable.",
        valueName: "sha256/BASE64"))
    var pins: [String] = []

    @Option(name: .customLong("pin-cert"), help: ArgumentHelp(
        "Accept the server only if its chain contains a certificate of this PEM or DER file. Repeatable.", valueName: "FILE"))
    var pinCertificates: [String] = []

    @Option(name: .customLong("cert"), help: ArgumentHelp("Client certificate (PEM) for mutual TLS.", valueName: "FILE"))
    var certificate: String?

    @Option(name: .customLong("cert-key"), help: ArgumentHelp(
        "The client certificate's private key (PEM); default: the --cert file.", valueName: "FILE"))
    var certificateKey: String?

    @Option(name: .customLong("proxy"), help: ArgumentHelp(
        "Send through this proxy (http://, https:// or socks5h://). Default: the http_proxy/https_proxy variables.",
        valueName: "URL"))
    var proxy: String?

    @Option(name: .customLong("timeout"), help: ArgumentHelp(
        "Fail (exit 2) when no byte moves for this many seconds. Default: 60; 0: none.", valueName: "SECONDS"))
    var timeout: Double?

    @Flag(name: [.customShort("F"), .customLong("follow")], help: "Follow redirects (not followed by default: the 3xx is printed).")
    var follow = false

    @Option(name: .customLong("max-redirects"), help: ArgumentHelp("With --follow, the most redirects followed (exit 6 beyond).", valueName: "N"))
    var maxRedirects = 30

    @Flag(name: .customLong("http1.1"), help: "Speak HTTP/1.1 only.")
    var http1 = false

    @Flag(name: .customLong("http2"), help: "HTTP/2 where the server offers it over https (ALPN; the default). Over http: HTTP/1.1.")
    var http2 = false

    @Flag(name: .customLong("http2-prior-knowledge"), help: "HTTP/2 without negotiation, over http too (the server must speak it).")
    var http2PriorKnowledge = false

    @Option(name: .customLong("unix-socket"), help: ArgumentHelp(
        "Connect through this Unix domain socket (the URL still gives the Host and path).", valueName: "PATH"))
    var unixSocket: String?

    func validate() throws {
        if [http1, http2, http2PriorKnowledge].filter({ $0 }).count > 1 {
            throw ValidationError("--http1.1, --http2 and --http2-prior-knowledge exclude each other")
        }
        if let timeout, !timeout.isFinite || timeout < 0 { throw ValidationError("--timeout takes a number of seconds") }
        if maxRedirects < 0 { throw ValidationError("--max-redirects takes a count") }
        if certificateKey != nil && certificate == nil { throw ValidationError("--cert-key needs --cert") }
        for pin in pins where Self.pinHash(pin) == nil {
            throw ValidationError("--pin takes sha256/BASE64 (the base64 of a 32-byte SHA-256), not '\(pin)'")
        }
    }

    /// The base64 digest of a `--pin` value (`sha256/X`, curl's `sha256//X`, or `X`).
    static func pinHash(_ text: String) -> String? {
        // A digest may itself begin with "/": each reading is tried, and only one of them is
        // 44 characters of base64 for 32 bytes.
        let readings = ["sha256//", "sha256/", ""].compactMap { prefix in
            text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : nil
        }
        return readings.first { Data(base64Encoded: $0)?.count == 32 }
    }

    /// The session configuration for a request to `url`.
    func configuration(for url: URL) -> SessionConfiguration {
        var configuration = SessionConfiguration.default
        // The tool observes no task notifications: each would cost its request for nothing.
        configuration.postsTaskNotifications = false
        if let timeout { configuration.timeoutIntervalForRequest = timeout == 0 ? .infinity : timeout }
        configuration.maximumRedirects = maxRedirects
        if http1 { configuration.httpVersion = .http1_1 }
        if http2 { configuration.httpVersion = .http2 }
        if http2PriorKnowledge { configuration.httpVersion = .http2PriorKnowledge }
        if let proxy { configuration.proxy = .url(proxy) }
        configuration.unixSocketPath = unixSocket
        if let certificate {
            let key = certificateKey ?? certificate
            configuration.clientCertificate = .pemFiles(
                certificate: URL(fileURLWithPath: certificate), privateKey: URL(fileURLWithPath: key), passphrase: nil)
        }
        return configuration
    }

    /// The security policy `--verify`, `--pin` and `--pin-cert` ask for; nil: the default.
    ///
    /// Curlew's `SecurityPolicy` pins certificates, and a `--pin` names a key: the chain the
    /// server sends is fetched first (`peerCertificates(for:)`, a handshake without a
    /// request) to find the certificates that carry the pinned keys. The request's own
    /// handshake is then judged by the policy with those pinned, so a server that shows the
    /// key only the first time is still refused.
    func securityPolicy(for url: URL, configuration: SessionConfiguration) async throws -> SecurityPolicy? {
        var policy = SecurityPolicy.default
        var changed = false
        switch verify?.lowercased() {
        case nil, "yes", "true": break
        case "no", "false":
            policy.allowInvalidCertificates = true
            policy.validatesDomainName = false
            changed = true
        default:
            let path = verify ?? ""
            do {
                policy.trustedRootCertificates = Set(try Certificate.certificates(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw ToolFailure(.error, "--verify: \(ToolFailure.oneLine(error))")
            }
            changed = true
        }
        var pinned = Set<Certificate>()
        for path in pinCertificates {
            do {
                pinned.formUnion(try Certificate.certificates(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw ToolFailure(.error, "--pin-cert: \(ToolFailure.oneLine(error))")
            }
        }
        if !pins.isEmpty {
            guard url.scheme?.lowercased() == "https" else { throw ToolFailure(.error, "--pin needs an https URL") }
            let wanted = Set(pins.compactMap(Self.pinHash))
            let manager = URLSessionManager(configuration: configuration)
            let trust: ServerTrust
            do {
                trust = try await Exchange.using(manager) { try await manager.peerCertificates(for: url) }
            } catch {
                throw ToolFailure(transferError: error)
            }
            let matching = trust.certificates.filter { wanted.contains($0.publicKeySHA256) }
            guard !matching.isEmpty else {
                throw ToolFailure(.tlsFailure, "no certificate \(url.host ?? "the server") sent has a key pinned with --pin")
            }
            pinned.formUnion(matching)
            policy.pinningMode = .publicKey
        } else if !pinned.isEmpty {
            policy.pinningMode = .certificate
        }
        if !pinned.isEmpty {
            policy.pinnedCertificates = pinned
            changed = true
        }
        return changed ? policy : nil
    }
}
