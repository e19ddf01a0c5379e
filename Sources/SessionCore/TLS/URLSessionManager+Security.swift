import Foundation
import Security
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Server trust, authentication challenges and certificate inspection.
extension URLSessionManager {
    /// The tag of the trust `request` would be admitted under now (the security policy, the
    /// per-host and proxy pins, the system roots in use), as the response cache records it;
    /// nil for a request no TLS check stands behind. For caches of the package's own
    /// (`ImageDownloader`'s image cache) that must not answer under another trust.
    package func cacheTrustTag(for request: URLRequest) -> String? { engine.cacheTrust(for: request)?.tag }

    /// The policy every TLS handshake of this manager is judged by (AFNetworking's
    /// `securityPolicy`). Default: `SecurityPolicy.default` (system roots, host names checked).
    ///
    /// A change applies to every later request, including requests that would reuse a
    /// connection or resume a TLS session verified under the previous policy: those are
    /// judged again on a new connection. Assigning a policy that can never accept a server
    /// (a pinning mode with no pins) does not fall back to anything: every https request then
    /// fails with `SessionError.serverTrustEvaluationFailed` (reason `.noPinnedCertificates`).
    /// Prefer `setSecurityPolicy(_:)`, which refuses such a policy when you set it.
    public var securityPolicy: SecurityPolicy {
        get { engine.security.policy }
        set { engine.security.setPolicy(newValue) }
    }

    /// Sets `securityPolicy` after `policy.validateConfiguration()` accepted it; throws
    /// `SecurityPolicy.ConfigurationError` (and keeps the previous policy) otherwise.
    public func setSecurityPolicy(_ policy: SecurityPolicy) throws {
        try policy.validateConfiguration()
        engine.security.setPolicy(policy)
    }

    /// Answers authentication challenges (AFNetworking's
    /// `setAuthenticationChallengeHandler:`). Runs on `operationQueue`, never on the driver.
    ///
    /// - Server trust (`URLProtectionSpace.serverTrustAuthenticationMethod`): asked when the policy refused
    ///   a server during the handshake (no byte of the request was sent). The certificates are
    ///   in `challenge.protectionSpace.curlewServerTrust`. `.useCredential(_)` retries the task
    ///   trusting exactly that leaf certificate (by SHA-256), for this task only;
    ///   `.performDefaultHandling` / `.rejectProtectionSpace` keep the refusal
    ///   (`SessionError.serverTrustEvaluationFailed`); `.cancel` cancels the task.
    /// - HTTP Basic (`NSURLAuthenticationMethodHTTPBasic`): asked on a 401 whose
    ///   `WWW-Authenticate` offers Basic; `.useCredential(URLCredential(user:password:persistence:))`
    ///   retries with those credentials (same origin only); the other answers deliver the 401.
    ///
    /// While a session-level handler is set (`setSessionDidReceiveAuthenticationChallengeBlock(_:)`),
    /// server-trust challenges go to it instead. A task asks at most three times. Pass nil to
    /// remove the handler.
    public func setAuthenticationChallengeHandler(
        _ block: (@Sendable (SessionTask, URLAuthenticationChallenge) -> AuthChallengeDisposition)?
    ) {
        engine.updateHooks { $0.authenticationChallenge = block }
    }

    /// Connects to `url`'s host, completes the TLS handshake up to certificate verification,
    /// and returns the certificates the server presented, leaf first. The connection is closed
    /// before any request byte is sent, whatever the security policy says (nothing is trusted
    /// or pinned by this call). `curlew pin` is built on it.
    ///
    /// Throws `SessionError` when no certificate could be read (not https, no connection,
    /// handshake failure before the certificate).
    public func peerCertificates(for url: URL) async throws -> ServerTrust {
        guard url.scheme?.lowercased() == "https" else {
            throw SessionError.unsupportedScheme(url.scheme ?? "")
        }
        var request = URLRequest(url: url)
        request.httpMethod = "HEAD"
        let security = engine.security
        let waiter = InspectionWaiter()
        let task = dataTask(with: request, completionHandler: { waiter.finish($0) })
        security.beginInspection(of: task.taskIdentifier)
        task.resume()
        let response = await waiter.wait()
        // The completion handler runs after the driver finished the transfer: the record is final.
        if let trust = security.endInspection(of: task.taskIdentifier) { return trust }
        if case .failure(let error) = response.result { throw error }
        throw SessionError.badServerResponse("the server presented no certificate")
    }
}

/// Hands one completion to one awaiting caller, whichever comes first.
private final class InspectionWaiter: Sendable {
    private struct State {
        var continuation: CheckedContinuation<DataResponse, Never>?
        var response: DataResponse?
    }

    private let state = Mutex(State())

    func finish(_ response: DataResponse) {
        let continuation = state.withLock { state -> CheckedContinuation<DataResponse, Never>? in
            guard let continuation = state.continuation else {
                state.response = response
                return nil
            }
            state.continuation = nil
            return continuation
        }
        continuation?.resume(returning: response)
    }

    func wait() async -> DataResponse {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> DataResponse? in
                if let response = state.response { return response }
                state.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
