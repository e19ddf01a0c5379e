import Foundation
import Serialization
import Security
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The TLS and authentication-challenge state one transfer carries across its requests
/// (redirects, retries on a fresh connection, answered challenges). `TaskDelegate` holds it
/// as one stored property; everything that reads or changes it lives here or in
/// `TaskDelegate+Security.swift`.
///
/// Confinement: driver thread only, like the task delegate that holds it.
struct TransferSecurityState {
    /// How many times one task may ask the challenge handler (trust and HTTP together).
    static let maximumChallengeAttempts = 3

    /// What the driver does after the challenge handler answered.
    enum ChallengeAction: Equatable {
        /// Send the same request again (with the override or the credentials in place).
        case retry
        /// Complete the task with this error.
        case fail(SessionError)
        /// Complete the task with the response as received (the 401).
        case deliver
    }

    /// The TLS enforcement context handed to curl's and OpenSSL's callbacks: made by the
    /// first https request, then kept (and re-prepared) for every later one.
    var handshake: TLSHandshakeContext?
    /// The context that admits this exchange's request in the prerequest callback: the
    /// `handshake` for an https request, nil for plain http (set by `configureSecurity`).
    var tlsAdmission: TLSHandshakeContext?
    /// Challenges put to the handler so far (bounded by `maximumChallengeAttempts`).
    private(set) var challengeAttempts = 0
    /// The challenge the handler is deciding.
    private(set) var pendingChallenge: PendingChallenge?
    /// Credentials a challenge handler supplied, sent to the challenge's origin only.
    private(set) var challengeCredential: ChallengeCredential?
    /// The next attempt opens a new connection with a full handshake (no reuse, no resumption).
    private(set) var requiresFreshConnection = false
    /// This 401 is held back from the task while the challenge handler decides.
    var isWithheldForChallenge = false
    /// The current request runs libcurl's own host name check (`CURLOPT_SSL_VERIFYHOST` 2).
    var libcurlChecksHost = false
    /// The current attempt carries Digest credentials: its first 401 is curl's own first
    /// pass (the nonce), which curl answers itself in the same transfer.
    var expectsLibcurlAuthPass = false
    /// The session's stored credential was tried once for this task.
    var usedStoredCredential = false

    /// Whether the handler may still be asked.
    var mayAskHandler: Bool { challengeAttempts < Self.maximumChallengeAttempts }

    /// The HTTP credentials to send to `url`: only to the origin whose challenge they answered.
    func credential(for url: URL) -> ChallengeCredential? {
        guard let challengeCredential, RedirectPolicy.isSameOrigin(challengeCredential.url, url) else { return nil }
        return challengeCredential
    }

    // MARK: - The end of a transfer

    /// The security reason a failed transfer failed, if it has one: the policy's refusal
    /// (not curl's generic 35/60), libcurl's own host check, or a connection verified under
    /// another policy. `curlMessage`: libcurl's error text for the transfer, read only when used.
    func error(for code: CurlCode, curlMessage: @autoclosure () -> String) -> SessionError? {
        guard !code.isOK, let context = handshake else { return nil }
        if let failure = context.failure { return .serverTrustEvaluationFailed(reason: failure) }
        if context.refusedStaleConnection {
            return .serverTrustEvaluationFailed(
                reason: TrustEvaluationError(
                    reason: .invalidChain,
                    detail: "the connection was verified under a different security policy and could not be verified again"))
        }
        // The policy accepted the chain (the verify result is X509_V_OK), so a verification
        // failure now can only be libcurl's host name check: the second lock held.
        if code.isPeerVerificationFailure, libcurlChecksHost {
            return .serverTrustEvaluationFailed(
                reason: TrustEvaluationError(
                    reason: .hostMismatch, detail: "libcurl's host name check refused the certificate: \(curlMessage())"))
        }
        return nil
    }

    /// True once when curl refused a request (before sending it) because its connection or
    /// resumed session was verified under another policy: the request is then retried on a
    /// new connection with a full handshake, which the current policy judges.
    mutating func shouldRetryOnFreshConnection(code: CurlCode) -> Bool {
        guard !code.isOK, let context = handshake, context.refusedStaleConnection, context.failure == nil,
            !requiresFreshConnection
        else { return false }
        requiresFreshConnection = true
        return true
    }

    /// Decides (at the response head) whether a 401 is held back from the task while the
    /// challenge handler is asked.
    mutating func withholdsForChallenge(_ response: HTTPResponseHead, canReplayBody: Bool, hasHandler: Bool) -> Bool {
        if response.statusCode == 401, expectsLibcurlAuthPass {
            // Held back while curl answers it; if curl does not (another scheme was asked
            // for), it is the transfer's last answer and is judged as any 401.
            expectsLibcurlAuthPass = false
            isWithheldForChallenge = true
            return true
        }
        guard response.statusCode == 401, mayAskHandler, canReplayBody, hasHandler,
            let field = response.value(forHTTPHeaderField: "WWW-Authenticate"),
            HTTPAuthenticationScheme.parse(field) != nil
        else { return false }
        isWithheldForChallenge = true
        return true
    }

    /// The challenge to put to the handler for a transfer of `url` that just ended, if any;
    /// counts the attempt.
    mutating func takePendingChallenge(code: CurlCode, response: HTTPResponseHead?, url: URL) -> PendingChallenge? {
        guard mayAskHandler else { return nil }
        let kind: PendingChallenge.Kind
        if !code.isOK, let context = handshake, !context.isInspection, let trust = context.rejectedTrust,
            let failure = context.failure
        {
            kind = .serverTrust(trust, failure)
        } else if code.isOK, isWithheldForChallenge, let response,
            let field = response.value(forHTTPHeaderField: "WWW-Authenticate"),
            let parsed = HTTPAuthenticationScheme.parse(field)
        {
            kind = .http(scheme: parsed.scheme, realm: parsed.realm)
        } else {
            return nil
        }
        challengeAttempts += 1
        let scheme = url.scheme?.lowercased() ?? "https"
        let challenge = PendingChallenge(
            kind: kind, url: url, host: url.host ?? "", port: URLOrigin.port(of: url, assumedScheme: "https"), scheme: scheme,
            previousFailureCount: challengeAttempts - 1, failureResponse: response)
        pendingChallenge = challenge
        return challenge
    }

    /// Applies the handler's answer to the challenge taken last. A trusted certificate is
    /// bound to the challenge's origin (scheme, host and port): it never vouches for a server
    /// that a redirect leads to, which the policy (or a new challenge) judges instead.
    mutating func resolveChallenge(_ disposition: AuthChallengeDisposition, canReplayBody: Bool) -> ChallengeAction {
        guard let challenge = pendingChallenge else { return .deliver }
        pendingChallenge = nil
        switch (challenge.kind, disposition) {
        case (_, .cancel):
            return .fail(.cancelled)
        case (.serverTrust(let trust, _), .useCredential):
            guard let leaf = trust.certificates.first else {
                return .fail(.serverTrustEvaluationFailed(
                    reason: TrustEvaluationError(reason: .emptyChain, detail: "the server presented no certificate")))
            }
            handshake?.trustOverride = TLSHandshakeContext.TrustOverride(
                origin: challenge.url, leafDigest: TLSHandshakeContext.sha256(leaf.derData))
            return .retry
        case (.serverTrust(_, let failure), .performDefaultHandling), (.serverTrust(_, let failure), .rejectProtectionSpace):
            return .fail(.serverTrustEvaluationFailed(reason: failure))
        case (.http(let scheme, _), .useCredential(let credential)):
            guard let user = credential.user, let password = credential.password, canReplayBody else { return .deliver }
            challengeCredential = ChallengeCredential(url: challenge.url, user: user, password: password, scheme: scheme)
            return .retry
        case (.http, .performDefaultHandling), (.http, .rejectProtectionSpace):
            return .deliver
        }
    }

    /// Drops curl's reference to the TLS context (the transfer has left the multi handle).
    func releaseHandshakeContext() {
        handshake?.releaseRetainedReference()
    }
}
