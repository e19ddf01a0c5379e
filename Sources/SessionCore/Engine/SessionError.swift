import Foundation
import Security

/// Every way a Curlew transfer can fail, one readable case per failure.
///
/// Cases that come from libcurl carry curl's own error message (`CURLOPT_ERRORBUFFER`),
/// so a log line says *why* a connection failed, not only *that* it failed.
public enum SessionError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// The task was cancelled, by `cancel()`, by a cancelled Swift `Task`, or by invalidation.
    case cancelled
    /// No byte moved for longer than the request's idle timeout, or the whole task took
    /// longer than `timeoutIntervalForResource`. The message says which.
    case timedOut(String)
    /// The TCP connection could not be made (refused, unreachable, connect timeout).
    case cannotConnect(String)
    /// The host name could not be resolved.
    case dnsFailure(String)
    /// The manager's `SecurityPolicy` (or a challenge handler's decision) refused the
    /// server during the TLS handshake, before any byte of the request was sent; `reason`
    /// says why (expired, unknown issuer, host mismatch, no pin matched, ...).
    case serverTrustEvaluationFailed(reason: TrustEvaluationError)
    /// The TLS handshake failed for a reason other than the trust policy: TLS itself refused
    /// (an alert, no shared version or cipher, a client certificate not accepted). A handshake
    /// the connection's end cut (a reset, the peer closing before its hello) is `networkLost`.
    case tlsHandshakeFailed(String)
    /// The redirect chain was longer than `SessionConfiguration.maximumRedirects`.
    case tooManyRedirects(Int)
    /// The connection broke while the request or response was in flight, or during its TLS
    /// handshake.
    case networkLost(String)
    /// The server sent something that is not a valid HTTP response.
    case badServerResponse(String)
    /// The response head was larger than `SessionConfiguration.maximumResponseHeaderBytes`.
    case responseHeadersTooLarge(limit: Int)
    /// The decoded body grew beyond `SessionConfiguration.decompressionLimit` times the
    /// bytes received: a compression bomb is refused before it fills memory.
    case decompressionLimitExceeded(ratio: Int)
    /// The response body was announced or grew larger than
    /// `SessionConfiguration.maximumCollectedBodyBytes` (`limit`) for a task that keeps it in
    /// memory; or the body of an answer held back at its head (a 401 nobody answered, a
    /// redirect the hook refused) outgrew what was kept for it: that limit for a task that
    /// collects its body (a redirect's: 1 MiB at most), 1 MiB for a download or a stream.
    case responseBodyTooLarge(limit: Int)
    /// The request body stream failed or ended before its declared length.
    case bodyStreamFailed(String)
    /// A download could not be written to or moved into place.
    case fileWriteFailed(String)
    /// A download made from resume data was answered with a status that is neither its
    /// bytes nor a new body (404, 429, 503, an unanswered 401, or a 416 for the byte range it
    /// asked for). The partial file is kept: `resumeData` (also `DownloadTask.resumeData`)
    /// continues it later; nil when there were no partial bytes to keep.
    case resumeFailed(statusCode: Int, resumeData: Data?)
    /// Resume data handed to `downloadTask(withResumeData:...)` cannot be used: not Curlew's,
    /// of an unknown version, or with values that cannot be sent. The message says which.
    case invalidResumeData(String)
    /// The request may be answered only from the response cache (`.returnCacheDataDontLoad`,
    /// `Cache-Control: only-if-cached`) and the cache holds nothing for it.
    case resourceNotCached
    /// The session manager was invalidated before or while the task ran.
    case sessionInvalidated
    /// The request's URL is missing or cannot be used.
    case badURL(String)
    /// The URL's scheme is not one Curlew speaks (`http`, `https`).
    case unsupportedScheme(String)
    /// A header name is not an RFC 9110 token, or a value holds a control character other than
    /// tab (CR, LF and NUL would corrupt the request; the rule is the serializers').
    case invalidHeader(String)
    /// A `SessionConfiguration` setting cannot be applied by this process's libcurl (DNS
    /// servers without c-ares, say) or was refused by it; the message names the setting.
    case invalidConfiguration(String)
    /// The proxy answered the `CONNECT` for a tunnel (an `https://` URL through an HTTP
    /// proxy, or a tunnel asked for) with `statusCode` outside 2xx: 407 for a credential it
    /// wanted or refused, 403, 502 or 503 when it could not reach the origin. The proxy's
    /// answer, not the origin's: nothing was sent to the origin. `message` is libcurl's.
    case proxyRefusedTunnel(statusCode: Int, message: String)
    /// Any other libcurl failure, with its `CURLcode` and message.
    case curl(code: Int, message: String)
    /// A request interceptor ended the task with an error of its own: an adapter threw, or a
    /// retrier threw or answered `RetryDecision.doNotRetryWithError`. Event monitors and logs
    /// see this case; the task's `error` and its response's result carry
    /// `InterceptorFailure.underlying` itself.
    case interceptorFailed(InterceptorFailure)

    /// A one-line, human readable description of the failure.
    public var description: String {
        switch self {
        case .cancelled: return "The request was cancelled."
        case .timedOut(let detail): return "The request timed out: \(detail)"
        case .cannotConnect(let detail): return "Could not connect to the server: \(detail)"
        case .dnsFailure(let detail): return "The host name could not be resolved: \(detail)"
        case .serverTrustEvaluationFailed(let reason): return "The server is not trusted: \(reason)"
        case .tlsHandshakeFailed(let detail): return "The TLS handshake failed: \(detail)"
        case .tooManyRedirects(let limit): return "Too many redirects (the limit is \(limit))."
        case .networkLost(let detail): return "The network connection was lost: \(detail)"
        case .badServerResponse(let detail): return "The server sent an invalid response: \(detail)"
        case .responseHeadersTooLarge(let limit): return "The response headers exceed \(limit) bytes."
        case .decompressionLimitExceeded(let ratio):
            return "The decoded response body exceeds \(ratio)× its encoded size (possible compression bomb)."
        case .responseBodyTooLarge(let limit): return "The response body exceeds \(limit) bytes, the most kept in memory."
        case .bodyStreamFailed(let detail): return "The request body could not be read: \(detail)"
        case .fileWriteFailed(let detail): return "The download could not be written: \(detail)"
        case .resumeFailed(let status, let resumeData):
            let kept = resumeData == nil ? "" : "; the partial file is kept, and the error's resume data continues it"
            return "The download could not continue: the server answered with status \(status)\(kept)."
        case .invalidResumeData(let detail): return "The resume data cannot be used: \(detail)"
        case .resourceNotCached: return "The response is not in the cache, and the request may not use the network."
        case .sessionInvalidated: return "The session manager has been invalidated."
        case .badURL(let detail): return "The URL cannot be used: \(detail)"
        case .unsupportedScheme(let scheme): return "Unsupported URL scheme '\(scheme)': Curlew speaks http and https."
        case .invalidHeader(let detail): return "Invalid HTTP header: \(detail)"
        case .invalidConfiguration(let detail): return "The session configuration cannot be applied: \(detail)"
        case .proxyRefusedTunnel(let status, let message): return "The proxy refused the tunnel with \(status): \(message)"
        case .curl(let code, let message): return "libcurl error \(code): \(message)"
        case .interceptorFailed(let failure): return failure.description
        }
    }

    /// The same text as `description`, for `localizedDescription`.
    public var errorDescription: String? { description }
}
