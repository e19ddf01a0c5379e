internal import CCurl
import Foundation
import Serialization
import Security
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// TLS enforcement, client certificates and authentication challenges for one transfer:
/// the curl options of each request, and the driver's entry points into the transfer's
/// `TransferSecurityState` (`securityState`). Driver thread only, like the rest of
/// `TaskDelegate`.
extension TaskDelegate {
    /// What the driver does after the challenge handler answered.
    typealias ChallengeAction = TransferSecurityState.ChallengeAction

    /// Installs the security options of the next request: the policy as OpenSSL's
    /// verification, the per-request admission check, client certificate and challenge
    /// credentials. Returns an error when TLS cannot be enforced (never runs unchecked).
    func configureSecurity() -> SessionError? {
        let url = prepared.url
        securityState.expectsLibcurlAuthPass = false
        if let credential = securityState.credential(for: url) {
            easy.set(CURLOPT_USERNAME, credential.user)
            easy.set(CURLOPT_PASSWORD, credential.password)
            easy.set(CURLOPT_HTTPAUTH, credential.scheme.curlAuthBit)
            // Digest: curl sends the request without credentials, reads the nonce from the
            // 401 and sends it again itself; that first 401 is not the task's answer.
            securityState.expectsLibcurlAuthPass = credential.scheme == .digest
        }
        securityState.libcurlChecksHost = false
        securityState.tlsAdmission = nil
        guard prepared.urlOrigin.isHTTPS || mayBecomeHTTPS else { return configureProxyPins() }
        guard case .success(let info) = CurlRuntime.state, info.isOpenSSL else {
            return .tlsHandshakeFailed(
                "libcurl's TLS backend is '\(CurlRuntime.versionDescription)', not OpenSSL: Curlew cannot enforce its security policy (pinning, host checks), so https is refused")
        }
        let security = engine.security
        let snapshot = security.snapshot(certificateAuthorityFile: engine.configuration.certificateAuthorityFile)
        if let error = snapshot.configurationError { return error }

        let context = securityState.handshake
            ?? TLSHandshakeContext(easy: easy.raw, security: security, taskIdentifier: task.taskIdentifier)
        securityState.handshake = context
        // Also drops a challenge override given for another origin (after a redirect).
        context.prepare(snapshot: snapshot, url: url, target: prepared.tlsTarget)
        context.allowsPlainConnection = mayBecomeHTTPS
        context.recordsRejectedChain = engine.hooks.answersServerTrust && securityState.mayAskHandler
        context.isInspection = security.isInspecting(task.taskIdentifier)
        configurePins(of: context, originIsHTTPS: true)
        let pointer = context.retainedReference()

        // libcurl verifies the peer, and the policy decides inside that verification (the
        // verify callback replaces X509_verify_cert), so a refusal fails the handshake.
        // The policy checks the host itself (X509_check_host / X509_check_ip_asc); libcurl's
        // own check is a second lock whenever the policy validates the domain name, and off
        // when it does not (`validatesDomainName = false`) or when a challenge handler
        // trusted this very certificate for this origin.
        let checksHost = snapshot.policy.validatesDomainName && context.trustOverride == nil
        // All four are put back to libcurl's defaults when the handle is recycled
        // (`EasyHandle.Restorable`): an idle handle keeps no callback and no context.
        var ok = easy.set(CURLOPT_SSL_VERIFYPEER, 1)
        ok = ok && easy.set(CURLOPT_SSL_VERIFYHOST, checksHost ? 2 : 0)
        ok = ok && easy.setSSLContextCallback(TLSCallbacks.configureContext, context: pointer)
        guard ok else {
            return .tlsHandshakeFailed("libcurl refused the TLS verification callbacks: the security policy cannot be enforced")
        }
        // The per-request admission check runs in the transfer's prerequest callback
        // (`CurlCallbacks.prerequest`, a base option of every handle).
        securityState.tlsAdmission = context
        securityState.libcurlChecksHost = checksHost
        if context.isInspection {
            // Certificate inspection needs a handshake of its own: a kept-alive connection or
            // a resumed session would skip the verify callback that records the chain.
            ok = easy.set(CURLOPT_FRESH_CONNECT, 1)
            ok = ok && easy.set(CURLOPT_FORBID_REUSE, 1)
            ok = ok && easy.set(CURLOPT_SSL_SESSIONID_CACHE, 0)
            guard ok else { return .tlsHandshakeFailed("libcurl refused a fresh connection for certificate inspection") }
        } else if securityState.requiresFreshConnection {
            easy.set(CURLOPT_FRESH_CONNECT, 1)
            easy.set(CURLOPT_SSL_SESSIONID_CACHE, 0)
        } else if context.mayUseHTTPSProxy, context.proxyPinning != nil {
            // A resumed proxy session skips the verify callback and carries no stamp this
            // check could read (CURLINFO_TLS_SSL_PTR is the origin's): with proxy pins, every
            // new proxy connection makes a full handshake (libcurl applies this to both).
            easy.set(CURLOPT_SSL_SESSIONID_CACHE, 0)
        }
        if let certificate = engine.configuration.clientCertificate, !configureClientCertificate(certificate) {
            return .tlsHandshakeFailed("libcurl refused the client certificate settings")
        }
        return nil
    }

    /// The per-host pins and proxy settings of the request about to be configured.
    private func configurePins(of context: TLSHandshakeContext, originIsHTTPS: Bool) {
        let proxy = engine.configuration.proxy  // field by field: no copy of the whole struct
        switch proxy {
        case .none: context.mayUseHTTPSProxy = false
        case .environment: context.mayUseHTTPSProxy = true
        case .url: context.mayUseHTTPSProxy = proxy.isHTTPS
        }
        context.originIsHTTPS = originIsHTTPS
        context.pinning = engine.configuration.pinningPolicy
        context.proxyPinning = engine.configuration.proxyPinningPolicy
        context.proxyEndpoint = engine.configuration.proxyPinningPolicy == nil
            ? nil : TLSHandshakeContext.proxyEndpoint(proxy, originIsHTTPS: originIsHTTPS)
        // An http URL HSTS may upgrade: which variable's proxy carries it is known only once
        // libcurl settled the scheme (`currentProxyEndpoint`).
        context.plainProxyEndpoint = engine.configuration.proxyPinningPolicy == nil || !context.allowsPlainConnection
            || proxy != .environment ? nil : TLSHandshakeContext.proxyEndpoint(proxy, originIsHTTPS: false)
    }

    /// A plain http request through an HTTPS proxy with pins of its own: the verify callback
    /// judges that proxy's handshake (every handshake of such a request is the proxy's).
    /// Nothing else about TLS applies: there is no origin handshake to admit.
    private func configureProxyPins() -> SessionError? {
        let proxy = engine.configuration.proxy
        guard engine.configuration.proxyPinningPolicy != nil, proxy != .none, proxy == .environment || proxy.isHTTPS
        else { return nil }
        guard case .success(let info) = CurlRuntime.state, info.isOpenSSL else {
            return .tlsHandshakeFailed(
                "libcurl's TLS backend is '\(CurlRuntime.versionDescription)', not OpenSSL: the HTTPS proxy's pins cannot be enforced")
        }
        let security = engine.security
        let context = securityState.handshake
            ?? TLSHandshakeContext(easy: easy.raw, security: security, taskIdentifier: task.taskIdentifier)
        securityState.handshake = context
        context.prepare(snapshot: security.snapshot, url: prepared.url)
        context.recordsRejectedChain = false
        context.isInspection = false
        configurePins(of: context, originIsHTTPS: false)
        let pointer = context.retainedReference()
        var ok = easy.setSSLContextCallback(TLSCallbacks.configureContext, context: pointer)
        // No resumption: a resumed proxy session would skip the pins (see configureSecurity).
        ok = ok && easy.set(CURLOPT_SSL_SESSIONID_CACHE, 0)
        guard ok else {
            return .tlsHandshakeFailed("libcurl refused the TLS verification callbacks: the HTTPS proxy's pins cannot be enforced")
        }
        return nil
    }

    private func configureClientCertificate(_ certificate: ClientCertificate) -> Bool {
        var ok: Bool
        let passphrase: String?
        switch certificate {
        case .pemFiles(let certificateURL, let keyURL, let secret):
            ok = easy.set(CURLOPT_SSLCERT, certificateURL.path)
            ok = ok && easy.set(CURLOPT_SSLKEY, keyURL.path)
            passphrase = secret
        case .pem(let certificateData, let keyData, let secret):
            ok = setBlob(CURLOPT_SSLCERT_BLOB, certificateData)
            ok = ok && setBlob(CURLOPT_SSLKEY_BLOB, keyData)
            passphrase = secret
        }
        ok = ok && easy.set(CURLOPT_SSLCERTTYPE, "PEM")
        ok = ok && easy.set(CURLOPT_SSLKEYTYPE, "PEM")
        if let passphrase { ok = ok && easy.set(CURLOPT_KEYPASSWD, passphrase) }
        return ok
    }

    /// `struct curl_blob` with `CURL_BLOB_COPY`: libcurl copies the bytes during the call.
    private func setBlob(_ option: CURLoption, _ data: Data) -> Bool {
        var bytes = data
        return bytes.withUnsafeMutableBytes { buffer -> Bool in
            var blob = curl_blob(data: buffer.baseAddress, len: buffer.count, flags: UInt32(CURL_BLOB_COPY))
            return withUnsafeMutablePointer(to: &blob) { easy.set(option, pointer: UnsafeMutableRawPointer($0)) }
        }
    }

    /// The security reason a failed transfer failed, if it has one (see
    /// `TransferSecurityState.error(for:curlMessage:)`).
    func securityError(for code: CURLcode) -> SessionError? {
        securityState.error(for: CurlCode(code), curlMessage: easy.errorMessage)
    }

    /// True once when a request was refused before sending because its connection or
    /// session was verified under another policy: retry it on a fresh connection.
    func shouldRetryOnFreshConnection(code: CURLcode) -> Bool {
        securityState.shouldRetryOnFreshConnection(code: CurlCode(code))
    }

    /// Decides (at the response head) whether a 401 is held back from the task while the
    /// challenge handler is asked.
    func withholdsForChallenge(_ response: HTTPResponseHead) -> Bool {
        var answerable = engine.hooks.authenticationChallenge != nil
        if !answerable, response.statusCode == 401, !engine.credentialStore.isEmpty,
            let field = response.value(forHTTPHeaderField: "WWW-Authenticate"),
            let parsed = HTTPAuthenticationScheme.parse(field)
        {
            // Without a handler, only a credential stored for this very protection space can
            // answer: any other 401 is the task's response at once.
            let space = SessionCredentialStore.Space(url: prepared.url, realm: parsed.realm, scheme: parsed.scheme)
            answerable = engine.credentialStore.credential(for: space) != nil
        }
        return securityState.withholdsForChallenge(response, canReplayBody: canReplayBody, hasHandler: answerable)
    }

    /// The credential stored for the session that answers `challenge` without asking the
    /// handler: once per task (a stored credential the server refused is not sent again).
    func storedCredential(for challenge: PendingChallenge) -> URLCredential? {
        guard case .http(let scheme, let realm) = challenge.kind, !securityState.usedStoredCredential,
            let stored = engine.credentialStore.credential(for: .init(url: challenge.url, realm: realm, scheme: scheme))
        else { return nil }
        securityState.usedStoredCredential = true
        return URLCredential(user: stored.user, password: stored.password, persistence: .forSession)
    }

    /// The challenge to put to the handler for a transfer that just ended, if any; counts
    /// the attempt.
    func takePendingChallenge(code: CURLcode) -> PendingChallenge? {
        securityState.takePendingChallenge(code: CurlCode(code), response: responseHead, url: prepared.url)
    }

    /// Applies the handler's answer to the challenge taken last.
    func resolveChallenge(_ disposition: AuthChallengeDisposition) -> ChallengeAction {
        var disposition = disposition
        if let challenge = securityState.pendingChallenge, case .http(let scheme, let realm) = challenge.kind {
            let space = SessionCredentialStore.Space(url: challenge.url, realm: realm, scheme: scheme)
            switch disposition {
            case .useCredential(let credential):
                engine.credentialStore.remember(credential, for: space)
            case .performDefaultHandling:
                // As URLSession's default handling: the session's stored credential, if any.
                if let stored = engine.credentialStore.credential(for: space) {
                    disposition = .useCredential(URLCredential(user: stored.user, password: stored.password, persistence: .forSession))
                }
            case .cancel, .rejectProtectionSpace:
                break
            }
        }
        return securityState.resolveChallenge(disposition, canReplayBody: canReplayBody)
    }

    /// Drops curl's reference to the TLS context (the transfer has left the multi handle).
    func releaseSecurityContext() {
        securityState.releaseHandshakeContext()
    }
}
