internal import CCurl
import Foundation
import Security
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// TLS enforcement, client certificates and authentication challenges for one transfer.
/// Driver thread only, like the rest of `TaskDelegate`.
extension TaskDelegate {
    /// How many times one task may ask the challenge handler (trust and HTTP together).
    static let maximumChallengeAttempts = 3
    /// `CURLAUTH_BASIC` (`((unsigned long)1)<<0`, a cast macro Swift cannot import).
    static let curlAuthBasic = 1

    /// What the driver does after the challenge handler answered.
    enum ChallengeAction {
        /// Send the same request again (with the override or the credentials in place).
        case retry
        /// Complete the task with this error.
        case fail(SessionError)
        /// Complete the task with the response as received (the 401).
        case deliver
    }

    /// Installs the security options of the next request: the policy as OpenSSL's
    /// verification, the per-request admission check, client certificate and challenge
    /// credentials. Returns an error when TLS cannot be enforced (never runs unchecked).
    func configureSecurity() -> SessionError? {
        let url = prepared.url
        if let credential = challengeCredential, RedirectPolicy.isSameOrigin(credential.url, url) {
            easy.set(CURLOPT_USERNAME, credential.user)
            easy.set(CURLOPT_PASSWORD, credential.password)
            easy.set(CURLOPT_HTTPAUTH, Self.curlAuthBasic)
        }
        guard url.scheme?.lowercased() == "https" else { return nil }
        guard case .success(let info) = CurlRuntime.state, info.isOpenSSL else {
            return .tlsHandshakeFailed(
                "libcurl's TLS backend is '\(CurlRuntime.versionDescription)', not OpenSSL: Curlew cannot enforce its security policy (pinning, host checks), so https is refused")
        }
        let security = engine.security
        let snapshot = security.snapshot(certificateAuthorityFile: engine.configuration.certificateAuthorityFile)
        if let error = snapshot.configurationError { return error }

        let context = tlsContext ?? TLSHandshakeContext(easy: easy.raw, security: security, taskIdentifier: task.taskIdentifier)
        tlsContext = context
        context.prepare(snapshot: snapshot, host: url.host)
        context.recordsRejectedChain = engine.hooks.authenticationChallenge != nil
            && challengeAttempts < Self.maximumChallengeAttempts
        context.isInspection = security.isInspecting(task.taskIdentifier)
        let pointer = context.retainedReference()

        // libcurl verifies the peer (so a failed callback fails the handshake) and the
        // policy checks the host itself with X509_check_host / X509_check_ip_asc: curl's own
        // host check would refuse what `validatesDomainName = false` explicitly allows.
        var ok = easy.set(CURLOPT_SSL_VERIFYPEER, 1)
        ok = ok && easy.set(CURLOPT_SSL_VERIFYHOST, 0)
        ok = ok && curlew_easy_setopt_ssl_ctx_function(easy.raw, TLSCallbacks.configureContext) == CURLE_OK
        ok = ok && easy.set(CURLOPT_SSL_CTX_DATA, pointer: pointer)
        ok = ok && curlew_easy_setopt_prereq_function(easy.raw, TLSCallbacks.admit) == CURLE_OK
        ok = ok && easy.set(CURLOPT_PREREQDATA, pointer: pointer)
        guard ok else {
            return .tlsHandshakeFailed("libcurl refused the TLS verification callbacks: the security policy cannot be enforced")
        }
        if requiresFreshConnection {
            easy.set(CURLOPT_FRESH_CONNECT, 1)
            easy.set(CURLOPT_SSL_SESSIONID_CACHE, 0)
        }
        if let certificate = engine.configuration.clientCertificate, !configureClientCertificate(certificate) {
            return .tlsHandshakeFailed("libcurl refused the client certificate settings")
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

    /// The security reason a failed transfer failed, if it has one: the policy's refusal
    /// (not curl's generic 35/60), or a connection verified under another policy.
    func securityError(for code: CURLcode) -> SessionError? {
        guard code != CURLE_OK, let context = tlsContext else { return nil }
        if let failure = context.failure { return .serverTrustEvaluationFailed(reason: failure) }
        if context.refusedStaleConnection {
            return .serverTrustEvaluationFailed(
                reason: TrustEvaluationError(
                    reason: .invalidChain,
                    detail: "the connection was verified under a different security policy and could not be verified again"))
        }
        return nil
    }

    /// True once when curl refused a request (before sending it) because its connection or
    /// resumed session was verified under another policy: the request is then retried on a
    /// new connection with a full handshake, which the current policy judges.
    func shouldRetryOnFreshConnection(code: CURLcode) -> Bool {
        guard code != CURLE_OK, let context = tlsContext, context.refusedStaleConnection, context.failure == nil,
            !requiresFreshConnection
        else { return false }
        requiresFreshConnection = true
        return true
    }

    /// Decides (at the response head) whether a 401 is held back from the task while the
    /// challenge handler is asked.
    func withholdsForChallenge(_ response: HTTPURLResponse) -> Bool {
        guard response.statusCode == 401, challengeAttempts < Self.maximumChallengeAttempts, canReplayBody,
            engine.hooks.authenticationChallenge != nil,
            let field = response.value(forHTTPHeaderField: "WWW-Authenticate"),
            HTTPAuthenticationScheme.parse(field) != nil
        else { return false }
        isWithheldForChallenge = true
        return true
    }

    /// The challenge to put to the handler for a transfer that just ended, if any; counts
    /// the attempt.
    func takePendingChallenge(code: CURLcode) -> PendingChallenge? {
        guard challengeAttempts < Self.maximumChallengeAttempts else { return nil }
        let kind: PendingChallenge.Kind
        if code != CURLE_OK, let context = tlsContext, !context.isInspection, let trust = context.rejectedTrust,
            let failure = context.failure
        {
            kind = .serverTrust(trust, failure)
        } else if code == CURLE_OK, isWithheldForChallenge, let response,
            let field = response.value(forHTTPHeaderField: "WWW-Authenticate"),
            let parsed = HTTPAuthenticationScheme.parse(field)
        {
            kind = .http(scheme: parsed.scheme, realm: parsed.realm)
        } else {
            return nil
        }
        challengeAttempts += 1
        let url = prepared.url
        let scheme = url.scheme?.lowercased() ?? "https"
        let challenge = PendingChallenge(
            kind: kind, host: url.host ?? "", port: url.port ?? (scheme == "https" ? 443 : 80), scheme: scheme,
            previousFailureCount: challengeAttempts - 1, failureResponse: response)
        pendingChallenge = challenge
        return challenge
    }

    /// Applies the handler's answer to the challenge taken last.
    func resolveChallenge(_ disposition: AuthChallengeDisposition) -> ChallengeAction {
        guard let challenge = pendingChallenge else { return .deliver }
        pendingChallenge = nil
        switch (challenge.kind, disposition) {
        case (_, .cancel):
            return .fail(.cancelled)
        case (.serverTrust(let trust, _), .useCredential):
            guard let leaf = trust.certificates.first else { return .fail(.serverTrustEvaluationFailed(reason: emptyChain)) }
            tlsContext?.trustedLeafDigest = TLSHandshakeContext.sha256(leaf.derData)
            return .retry
        case (.serverTrust(_, let failure), .performDefaultHandling), (.serverTrust(_, let failure), .rejectProtectionSpace):
            return .fail(.serverTrustEvaluationFailed(reason: failure))
        case (.http(let scheme, _), .useCredential(let credential)):
            guard let user = credential.user, let password = credential.password, canReplayBody else { return .deliver }
            challengeCredential = ChallengeCredential(url: prepared.url, user: user, password: password, scheme: scheme)
            return .retry
        case (.http, .performDefaultHandling), (.http, .rejectProtectionSpace):
            return .deliver
        }
    }

    private var emptyChain: TrustEvaluationError {
        TrustEvaluationError(reason: .emptyChain, detail: "the server presented no certificate")
    }

    /// Drops curl's reference to the TLS context (the transfer has left the multi handle).
    func releaseSecurityContext() {
        tlsContext?.releaseRetainedReference()
    }
}
