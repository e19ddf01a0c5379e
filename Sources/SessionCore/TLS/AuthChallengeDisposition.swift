import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How an authentication challenge handler answers (AFNetworking's
/// `NSURLSessionAuthChallengeDisposition` with its credential).
///
/// For a server-trust challenge (`URLProtectionSpace.serverTrustAuthenticationMethod`), `.useCredential`
/// trusts exactly the certificate the server presented (its leaf, by SHA-256) for this
/// task; the credential's contents are not used (Linux has no `URLCredential(trust:)`).
/// For an HTTP challenge (`NSURLAuthenticationMethodHTTPBasic`), `.useCredential` retries the
/// request with the credential's user and password.
public enum AuthChallengeDisposition: Sendable {
    /// Answer the challenge: trust the presented server, or send these credentials.
    case useCredential(URLCredential)
    /// Do what Curlew does without a handler: the policy's refusal stands
    /// (`SessionError.serverTrustEvaluationFailed`), or the 401 response is delivered.
    case performDefaultHandling
    /// Cancel the task: it completes with `SessionError.cancelled`.
    case cancel
    /// Decline this protection space; treated as `.performDefaultHandling`.
    case rejectProtectionSpace
}
