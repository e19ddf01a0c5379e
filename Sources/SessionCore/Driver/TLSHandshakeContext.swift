internal import CCurl
internal import COpenSSL
import Foundation
import Security
import Synchronization

/// One transfer's TLS enforcement state, handed to OpenSSL's and libcurl's C callbacks.
///
/// Confinement: created, changed and read on the driver thread only. The C callbacks that
/// use it (`CURLOPT_SSL_CTX_FUNCTION`, OpenSSL's certificate verification, and
/// `CURLOPT_PREREQFUNCTION`) all run inside `curl_multi_perform` on that thread.
///
/// Lifetime: the task delegate holds it, and hands curl a reference retained with
/// `Unmanaged.passRetained` that the driver releases when the transfer ends. Each
/// `SSL_CTX` that curl builds for a connection gets one more retained reference, stored as
/// the context's ex_data and released by OpenSSL's ex_data free callback when the `SSL_CTX`
/// is freed: a connection kept alive after its transfer ended can never call into a freed box.
final class TLSHandshakeContext {
    /// How a request was admitted onto its TLS connection.
    enum Admission: Equatable { case fullHandshake, resumedSession, reusedConnection }

    /// A challenge handler's "trust this certificate": exactly one leaf, for the origin
    /// (scheme, host, port) the handler was asked about, for this task only.
    struct TrustOverride {
        /// A URL of the origin the challenge was about.
        let origin: URL
        /// SHA-256 of the trusted leaf's DER.
        let leafDigest: Data
    }

    let easy: UnsafeMutableRawPointer
    let security: SessionSecurity
    let taskIdentifier: Int
    /// The retained reference given to curl (released by `releaseRetainedReference`).
    private(set) var retainedPointer: UnsafeMutableRawPointer?

    // Per request (reset by `prepare`).
    private(set) var policy = SecurityPolicy.default
    private(set) var policyTag: UInt = 0
    private(set) var host: String?
    /// The leaf a challenge handler trusted for this task, at one origin. Cleared by
    /// `prepare` when a request goes to another origin: it never survives a redirect there.
    var trustOverride: TrustOverride?
    /// The tag stamped on connections accepted through `trustOverride`: unique to this
    /// task, so no other task (and no later policy) ever inherits that decision.
    let overrideTag = SessionSecurity.makeTag()
    /// Keep the chain of a refused server (a challenge handler will be asked).
    var recordsRejectedChain = false
    /// Record the chain, refuse the handshake, send nothing (`peerCertificates(for:)`).
    var isInspection = false
    /// The request may go through an HTTPS proxy (an `https://` proxy URL, or the
    /// environment's choice): a handshake with another host than the origin is the proxy's.
    var mayUseHTTPSProxy = false
    /// Per-host pins of the origin (`SessionConfiguration.pinningPolicy`).
    var pinning: PinningPolicy?
    /// Per-host pins of an HTTPS proxy's own handshake (`SessionConfiguration.proxyPinningPolicy`).
    var proxyPinning: PinningPolicy?
    /// The proxy's configured host and port, as its pins and reports name it.
    var proxyEndpoint: (host: String, port: Int)?
    /// The proxy a plain `http://` request takes when HSTS does not upgrade it
    /// (`allowsPlainConnection`): under `Proxy.environment` another variable than an https
    /// request's (`http_proxy`). Nil: the same as `proxyEndpoint`.
    var plainProxyEndpoint: (host: String, port: Int)?
    /// False when the request's origin is plain http: every handshake is then an HTTPS
    /// proxy's (the context is installed only to check that proxy's pins).
    var originIsHTTPS = true
    /// The origin's port (for pin failure reports).
    private(set) var port = 443
    /// The request's URL is `http://` (installed because HSTS may upgrade it): a connection
    /// without TLS is admitted; one with TLS is checked like any other.
    var allowsPlainConnection = false

    // Results of the current request.
    private(set) var failure: TrustEvaluationError?
    private(set) var rejectedTrust: ServerTrust?
    private(set) var refusedStaleConnection = false
    private(set) var admission: Admission?
    /// A request of this task was admitted on a connection or session that the challenge
    /// handler's trust override accepted (`overrideTag`), not the policy: for this task only,
    /// so its answer is never stored for other tasks (`TransferOutcome.admittedByTrustOverride`).
    /// Kept across the task's hops and attempts: a server let in by an override that redirects
    /// elsewhere chose the content the task ends with.
    private(set) var admittedByTrustOverride = false
    /// The current request went without TLS of the origin's (`allowsPlainConnection`: HSTS did
    /// not upgrade it): `TransferOutcome.answeredInTheClear`.
    private(set) var admittedInTheClear = false
    private var verifiedInThisRequest = false

    init(easy: UnsafeMutableRawPointer, security: SessionSecurity, taskIdentifier: Int) {
        self.easy = easy
        self.security = security
        self.taskIdentifier = taskIdentifier
    }

    /// Takes the settings for the next request (to `url`) and forgets the previous one's
    /// results. A trust override given for another origin is dropped for good.
    func prepare(snapshot: SessionSecurity.Snapshot, url: URL, target: ParsedURLCache.TLSTarget? = nil) {
        policy = snapshot.policy
        policyTag = snapshot.tag
        let target = target ?? ParsedURLCache.TLSTarget(url)  // found on the caller's thread for https
        host = target.host
        port = target.port
        if let trustOverride, !RedirectPolicy.isSameOrigin(trustOverride.origin, url) {
            self.trustOverride = nil
        }
        failure = nil
        rejectedTrust = nil
        refusedStaleConnection = false
        admission = nil
        admittedInTheClear = false
        verifiedInThisRequest = false
    }

    /// The pointer to hand to curl's callbacks; retained until `releaseRetainedReference()`.
    func retainedReference() -> UnsafeMutableRawPointer {
        if let retainedPointer { return retainedPointer }
        let pointer = Unmanaged.passRetained(self).toOpaque()
        retainedPointer = pointer
        return pointer
    }

    /// Drops curl's reference (driver, once the easy handle left the multi handle).
    func releaseRetainedReference() {
        guard let pointer = retainedPointer else { return }
        retainedPointer = nil
        Unmanaged<TLSHandshakeContext>.fromOpaque(pointer).release()
    }

    // MARK: - Verification (OpenSSL's cert_verify_callback)

    /// Decides the handshake. Returns true to continue it.
    func verify(_ store: OpaquePointer) -> Bool {
        let ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()).map(OpaquePointer.init)
        if !originIsHTTPS || isProxyHandshake(ssl) {
            // libcurl gives an HTTPS proxy's own handshake the same SSL_CTX callback: that
            // certificate is the proxy's, judged as OpenSSL does by default against the proxy's
            // authorities (CURLOPT_PROXY_CAINFO; libcurl then checks its name), then by the
            // proxy's own pins, never against the origin's policy or pins. Nothing is stamped:
            // only the origin's own handshake admits a request.
            return verifyProxy(store, ssl)
        }
        if isInspection {
            if let trust = try? ServerTrust(storeContext: store) {
                security.record(trust, forInspectionOf: taskIdentifier)
            }
            return refuse(
                store, TrustEvaluationError(reason: .noPinMatched, detail: "certificate inspection only: the connection is closed before any request"))
        }
        if let trustOverride {
            let trust = try? ServerTrust(storeContext: store)
            guard let leaf = trust?.certificates.first, Self.sha256(leaf.derData) == trustOverride.leafDigest else {
                return refuse(
                    store, TrustEvaluationError(
                        reason: .noPinMatched, certificateSubject: trust?.certificates.first?.subjectSummary,
                        detail: "the server presented another certificate than the one the challenge handler trusted"))
            }
            // Pins never replace trust, and the host name must match (DESIGN): the handler may
            // vouch for an issuer the policy does not know, not for another host's certificate
            // under a host's enforced pins. A pin on a CA binds no host: any leaf that CA issued
            // (an `attacker.example` certificate) met the pin once the handler waived the name.
            if let host, policy.validatesDomainName, Self.hasEnforcedPins(pinning, host: host), !leaf.names(host: host) {
                return refuse(
                    store, TrustEvaluationError(
                        reason: .hostMismatch, certificateSubject: leaf.subjectSummary,
                        detail: "\(host) has enforced pins: its certificate must name it, whoever trusted the certificate"))
            }
            X509_STORE_CTX_set_error(store, X509_V_OK)
            // The handler vouched for the leaf in the policy's place, never for the pins. They
            // judge the leaf and the certificates that verifiably signed it, as the policy's
            // own pins do with invalid certificates allowed: a certificate the server merely
            // attached (the real site's public root, after an impostor's leaf) is no part of it.
            let linked = SecurityPolicy.signatureLinkedPath(trust?.certificates ?? [])
            guard passesPins(pinning, host: host, port: port, chain: linked, store: store, peer: "the server")
            else { return false }
            accept(ssl, tag: overrideTag)
            return true
        }
        let domain = security.skipsPolicyHostCheck.load(ordering: .relaxed) ? nil : host
        switch policy.evaluateHandshakeChain(storeContext: store, forDomain: domain) {
        case .success(let chain):
            // Pins add to the policy's trust: judged only on a chain the policy accepted. A pin
            // refusal keeps no rejected chain, so no challenge handler is asked to overrule it.
            guard passesPins(pinning, host: host, port: port, chain: chain, store: store, peer: "the server") else { return false }
            accept(ssl, tag: policyTag)
            return true
        case .failure(let error):
            failure = error
            if recordsRejectedChain { rejectedTrust = try? ServerTrust(storeContext: store) }
            security.count { $0.refusedHandshakes += 1 }
            return false
        }
    }

    /// Whether this handshake is with a proxy rather than the origin. libcurl's connection
    /// says so (`layer(of:)`). Where it cannot (outside 7.88–8.21), the server name decides:
    /// libcurl names the origin in SNI for every host name, so a handshake whose server name
    /// is another host's (or absent, for an origin that is a host name) is the HTTPS proxy's
    /// own. The server name is what libcurl sent, not what the peer said. That fallback cannot
    /// tell a proxy and an origin that are both addresses (neither is sent a server name) or
    /// share a name: such a handshake is judged as the origin's.
    ///
    /// Both names are compared without a trailing dot: libcurl sends `host.`'s SNI as `host`.
    /// An address in any form libcurl reads as one (`127.1`, `0x7f.0.0.1`) is an address.
    private func isProxyHandshake(_ ssl: OpaquePointer?) -> Bool {
        guard mayUseHTTPSProxy, let ssl, let host, !host.isEmpty else { return false }
        // libcurl's own word first: the server name cannot tell a proxy and an origin apart
        // when both are addresses (neither is sent one) or share a host name.
        switch Self.layer(of: ssl) {
        case .proxy: return true
        case .origin: return false
        case nil: break
        }
        let origin = Self.comparableName(host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")))
        let isAddress = origin.contains(":") || HostPattern.canonicalAddress(origin) != nil
        guard let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else { return !isAddress }
        return Self.comparableName(String(cString: name)) != origin
    }

    /// Which TLS layer of libcurl's connection an OpenSSL connection is.
    enum TLSLayer: Equatable {
        case origin
        case proxy
    }

    /// The layer `ssl` belongs to, as libcurl names it; nil when this libcurl cannot say.
    ///
    /// libcurl has no public way to tell which TLS layer of a connection a handshake belongs
    /// to, and the server name cannot always tell (above). Its OpenSSL backend sets each
    /// `SSL`'s app data to the connection filter that owns it, and a filter's first field is
    /// its type, whose first field is the type's name: "SSL" for the origin's layer,
    /// "SSL-PROXY" for an HTTPS proxy's (lib/cfilters.h, vtls.c; the same from 7.88 to 8.21).
    /// Read only where `CurlRuntime.namesTLSLayers`; any other name is no answer. (An HTTP/3
    /// connection's app data is another structure in 8.x; Curlew never asks for HTTP/3, and
    /// its handshakes do not reach this callback.)
    static func layer(of ssl: OpaquePointer) -> TLSLayer? {
        guard CurlRuntime.namesTLSLayers, let filter = SSL_get_ex_data(ssl, 0) else { return nil }
        guard let type = UnsafeRawPointer(filter).load(as: UnsafeRawPointer?.self),
            let name = type.load(as: UnsafePointer<CChar>?.self)
        else { return nil }
        // At most "SSL-PROXY" and its terminator are compared.
        if strncmp(name, "SSL", 4) == 0 { return .origin }
        if strncmp(name, "SSL-PROXY", 10) == 0 { return .proxy }
        return nil
    }

    /// `name` lowercased, without one trailing dot.
    private static func comparableName(_ name: String) -> String {
        let lower = name.lowercased()
        return lower.hasSuffix(".") ? String(lower.dropLast()) : lower
    }

    /// Records `error` as the transfer's failure and fails the handshake.
    func refuse(_ store: OpaquePointer, _ error: TrustEvaluationError) -> Bool {
        failure = error
        X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION)
        security.count { $0.refusedHandshakes += 1 }
        return false
    }

    /// Stamps the connection and its session with the tag of the decision that accepted
    /// them. The session's ex_data travels with it into libcurl's session cache (OpenSSL
    /// copies ex_data when it duplicates a session for a TLS 1.3 ticket).
    private func accept(_ ssl: OpaquePointer?, tag: UInt) {
        verifiedInThisRequest = true
        security.count { $0.verifiedHandshakes += 1 }
        guard let ssl else { return }
        let value = UnsafeMutableRawPointer(bitPattern: tag)
        _ = SSL_set_ex_data(ssl, Self.connectionTagIndex, value)
        if let session = SSL_get_session(ssl) {
            _ = SSL_SESSION_set_ex_data(session, Self.sessionTagIndex, value)
        }
    }

    // MARK: - Admission (CURLOPT_PREREQFUNCTION, before every request)

    /// Whether the request may be sent on the connection curl picked. Runs for new,
    /// resumed and kept-alive connections alike; a connection or session not stamped by
    /// a decision this request accepts is refused (fail closed: a resumed session carries
    /// no verified chain to re-check).
    func admitRequest() -> Bool {
        if isInspection {
            // Inspection never sends a request, whatever connection curl picked (it is
            // configured for a fresh one, so the verify callback has recorded the chain).
            failure = failure ?? TrustEvaluationError(
                reason: .noPinMatched, detail: "certificate inspection only: the connection is closed before any request")
            return false
        }
        var raw: UnsafeMutableRawPointer?
        // A plain request (`http://`, not upgraded by HSTS) has no TLS of its own: libcurl
        // reports none, or, through an HTTPS proxy, the proxy's layer (its first TLS layer of
        // either kind), which the proxy's own checks judged.
        if allowsPlainConnection, curlew_easy_getinfo_pointer(easy, CURLINFO_TLS_SSL_PTR, &raw) == CURLE_OK,
            raw?.assumingMemoryBound(to: curl_tlssessioninfo.self).pointee.internals.map({ Self.layer(of: OpaquePointer($0)) == .proxy }) ?? true
        {
            admittedInTheClear = true
            return true
        }
        guard curlew_easy_getinfo_pointer(easy, CURLINFO_TLS_SSL_PTR, &raw) == CURLE_OK,
            let info = raw?.assumingMemoryBound(to: curl_tlssessioninfo.self).pointee,
            info.backend == CURLSSLBACKEND_OPENSSL, let internals = info.internals
        else {
            refusedStaleConnection = true
            failure = TrustEvaluationError(reason: .emptyChain, detail: "no OpenSSL connection to check before sending the request")
            return false
        }
        let ssl = OpaquePointer(internals)
        let connectionStamp = SSL_get_ex_data(ssl, Self.connectionTagIndex)
        if isAccepted(connectionStamp) {
            if isOverride(connectionStamp) { admittedByTrustOverride = true }
            admission = verifiedInThisRequest ? .fullHandshake : .reusedConnection
            if !verifiedInThisRequest { security.count { $0.admittedReusedConnections += 1 } }
            return true
        }
        if SSL_session_reused(ssl) == 1, let session = SSL_get_session(ssl),
            case let sessionStamp = SSL_SESSION_get_ex_data(session, Self.sessionTagIndex), isAccepted(sessionStamp)
        {
            // Stamp the connection too, so later requests on it are admitted directly.
            _ = SSL_set_ex_data(ssl, Self.connectionTagIndex, sessionStamp)
            if isOverride(sessionStamp) { admittedByTrustOverride = true }
            admission = .resumedSession
            security.count { $0.admittedResumedSessions += 1 }
            return true
        }
        refusedStaleConnection = true
        security.count { $0.refusedStaleConnections += 1 }
        return false
    }

    /// Whether `stamp` is this task's trust override's.
    private func isOverride(_ stamp: UnsafeMutableRawPointer?) -> Bool {
        trustOverride != nil && stamp.map { UInt(bitPattern: $0) == overrideTag } == true
    }

    private func isAccepted(_ stamp: UnsafeMutableRawPointer?) -> Bool {
        guard let stamp else { return false }
        let tag = UInt(bitPattern: stamp)
        return tag == policyTag || (trustOverride != nil && tag == overrideTag)
    }

    // MARK: - OpenSSL plumbing

    /// SSL_OP_NO_RENEGOTIATION (`SSL_OP_BIT(30)`, a macro Swift cannot import): a kept-alive
    /// TLS 1.2 connection never re-runs verification after its transfer ended.
    static let noRenegotiation: UInt64 = 1 << 30

    static let connectionTagIndex: Int32 = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL, 0, nil, nil, nil, nil)
    static let sessionTagIndex: Int32 = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL_SESSION, 0, nil, nil, nil, nil)
    /// Holds the `SSL_CTX`'s own retained reference; OpenSSL calls the free function when
    /// the context is freed (on the driver thread, when curl closes the connection).
    static let contextOwnerIndex: Int32 = CRYPTO_get_ex_new_index(
        CRYPTO_EX_INDEX_SSL_CTX, 0, nil, nil, nil,
        { _, pointer, _, _, _, _ in
            guard let pointer else { return }
            Unmanaged<TLSHandshakeContext>.fromOpaque(pointer).release()
        })

    static func sha256(_ data: Data) -> Data {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        data.withUnsafeBytes { bytes in
            _ = SHA256(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, &digest)
        }
        return Data(digest)
    }
}

/// The C entry points for TLS enforcement. Each receives a `TLSHandshakeContext` retained
/// for as long as the callback can run (see its lifetime note).
enum TLSCallbacks {
    /// `CURLOPT_SSL_CTX_FUNCTION`: called for each new connection's `SSL_CTX`, before the
    /// handshake. Installs the policy as OpenSSL's certificate verification.
    static let configureContext: curl_ssl_ctx_callback = { _, sslContext, userptr in
        guard let sslContext, let userptr else { return CURLE_ABORTED_BY_CALLBACK }
        let context = OpaquePointer(sslContext)
        let owner = Unmanaged<TLSHandshakeContext>.fromOpaque(userptr).retain().toOpaque()
        guard SSL_CTX_set_ex_data(context, TLSHandshakeContext.contextOwnerIndex, owner) == 1 else {
            Unmanaged<TLSHandshakeContext>.fromOpaque(owner).release()
            return CURLE_OUT_OF_MEMORY
        }
        SSL_CTX_set_cert_verify_callback(context, TLSCallbacks.verify, owner)
        _ = SSL_CTX_set_options(context, TLSHandshakeContext.noRenegotiation)
        return CURLE_OK
    }

    /// OpenSSL's replacement for `X509_verify_cert`: 1 continues the handshake, 0 aborts it
    /// (before libcurl has written a byte of the request).
    static let verify: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Int32 = { store, argument in
        guard let store, let argument else { return 0 }
        let context = Unmanaged<TLSHandshakeContext>.fromOpaque(argument).takeUnretainedValue()
        return context.verify(store) ? 1 : 0
    }
}
