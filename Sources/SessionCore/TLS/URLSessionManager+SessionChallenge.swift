import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The session-level authentication challenge handler, and which handler a challenge goes to.
extension URLSessionManager {
    /// Answers connection-level challenges for every task of the manager (AFNetworking's
    /// `setSessionDidReceiveAuthenticationChallengeBlock:`, URLSession's
    /// `urlSession(_:didReceive:completionHandler:)`). Runs on `operationQueue`, never on the
    /// driver.
    ///
    /// The split is URLSession's. A connection-level challenge concerns the connection, not a
    /// request: in Curlew that is server trust (`URLProtectionSpace.serverTrustAuthenticationMethod`),
    /// asked when the `securityPolicy` refused a server during the handshake. While this handler
    /// is set it answers those, and the task-level handler
    /// (`setAuthenticationChallengeHandler(_:)`) is not asked for them; without it, the
    /// task-level handler is. Request-level challenges (a 401 offering Basic or Digest) always
    /// go to the task-level handler and never to this one.
    ///
    /// The answers mean what they mean for the task-level handler: `.useCredential(_)` retries
    /// the task trusting exactly the presented leaf certificate, for that task and origin only
    /// (the credential's contents are not used); `.performDefaultHandling` and
    /// `.rejectProtectionSpace` keep the refusal (`SessionError.serverTrustEvaluationFailed`);
    /// `.cancel` cancels the task. Client certificates are not asked for: they are configured
    /// up front (`SessionConfiguration.clientCertificate`).
    ///
    /// A task asks at most three times, counting both handlers. Pass nil to remove the handler.
    public func setSessionDidReceiveAuthenticationChallengeBlock(
        _ block: (@Sendable (URLAuthenticationChallenge) -> AuthChallengeDisposition)?
    ) {
        engine.updateHooks { $0.sessionChallenge = block }
    }
}

extension SessionEngine.Hooks {
    /// The handler's signature the driver calls, whichever level answers.
    typealias ChallengeHandler = @Sendable (SessionTask, URLAuthenticationChallenge) -> AuthChallengeDisposition

    /// Whether a refused server's chain is worth recording: some handler can answer for it.
    var answersServerTrust: Bool { sessionChallenge != nil || authenticationChallenge != nil }

    /// Whether any handler is set (the driver then looks for a challenge at a transfer's end).
    var answersChallenges: Bool { answersServerTrust }

    /// The handler `challenge` goes to: server trust to the session-level handler when one is
    /// set, everything else (and server trust without it) to the task-level handler.
    func handler(for challenge: PendingChallenge) -> ChallengeHandler? {
        if case .serverTrust = challenge.kind, let session = sessionChallenge {
            return { _, question in session(question) }
        }
        return authenticationChallenge
    }
}
