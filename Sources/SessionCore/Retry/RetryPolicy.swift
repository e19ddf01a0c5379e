import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Retries idempotent requests that failed in a way worth another try, with exponential
/// backoff and jitter, honouring `Retry-After` (Alamofire's `RetryPolicy`).
///
/// Attempt `n` (0-based) waits `exponentialBackoffScale × exponentialBackoffBase^n`, multiplied
/// by a random factor in `1 - jitter ... 1 + jitter`. A `Retry-After` header (seconds or an
/// HTTP date) is waited instead when it asks for longer; a wait over `maximumDelay` is not
/// made: the failure is delivered.
public struct RetryPolicy: RequestRetrier {
    /// Retries per task, at most.
    public var retryLimit: Int
    /// The growth of the wait between attempts.
    public var exponentialBackoffBase: Double
    /// The first wait, in seconds.
    public var exponentialBackoffScale: TimeInterval
    /// The random spread of each wait, as a fraction (0.2: ±20%); 0 for none.
    public var jitter: Double
    /// The longest wait the policy makes, in seconds.
    public var maximumDelay: TimeInterval
    /// Methods that are safe to send twice (RFC 9110 §9.2.2).
    public var retryableHTTPMethods: Set<String>
    /// Statuses worth another try.
    public var retryableHTTPStatusCodes: Set<Int>
    /// For a connection that could not be made or was lost, or a name that could not be
    /// resolved: wait until the network has a route to the host and send again then
    /// (``RetryDecision/retryWhenConnected``, at once when a route is there), instead of the
    /// backoff. Still counted against ``retryLimit``; the resource timeout bounds each wait.
    public var waitsForConnectivity: Bool = false

    /// The defaults: 2 retries, waits of about 0.5 s then 1 s, ±20%, at most 30 s; idempotent
    /// methods; 408, 500, 502, 503, 504; timeouts, refused connections, lost connections and
    /// DNS failures.
    public init(
        retryLimit: Int = 2, exponentialBackoffBase: Double = 2, exponentialBackoffScale: TimeInterval = 0.5,
        jitter: Double = 0.2, maximumDelay: TimeInterval = 30,
        retryableHTTPMethods: Set<String> = ["DELETE", "GET", "HEAD", "OPTIONS", "PUT", "TRACE"],
        retryableHTTPStatusCodes: Set<Int> = [408, 500, 502, 503, 504]
    ) {
        self.retryLimit = retryLimit
        self.exponentialBackoffBase = exponentialBackoffBase
        self.exponentialBackoffScale = exponentialBackoffScale
        self.jitter = jitter
        self.maximumDelay = maximumDelay
        self.retryableHTTPMethods = retryableHTTPMethods
        self.retryableHTTPStatusCodes = retryableHTTPStatusCodes
    }

    /// Whether `error` is a transport failure worth another try.
    ///
    /// The connectivity failures among them (``SessionError/isConnectivityFailure``) are
    /// answered with ``RetryDecision/retryWhenConnected`` when ``waitsForConnectivity`` is on.
    public static func isRetryable(_ error: SessionError) -> Bool {
        switch error {
        case .timedOut, .cannotConnect, .networkLost, .dnsFailure: return true
        default: return false
        }
    }

    /// Retries an idempotent request (`retryableHTTPMethods`) after a retryable transport error or
    /// status code, up to `retryLimit` times: after the backoff, or `Retry-After` when it asks for
    /// longer, and not at all when that wait exceeds `maximumDelay`.
    public func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        guard attempt >= 0, attempt < retryLimit else { return .doNotRetry }
        let method = (task.originalRequest?.httpMethod ?? "GET").uppercased()
        guard retryableHTTPMethods.contains(method) else { return .doNotRetry }
        if case .proxyRefusedTunnel(let status, _)? = error {
            // The proxy's own status for the tunnel: one the policy retries from an origin (a
            // 502, 503 or 504: it could not reach the origin just now) is retried the same way,
            // after the back-off, never as a wait for a route; a 407 or a 403 is not.
            guard retryableHTTPStatusCodes.contains(status) else { return .doNotRetry }
        } else if let error {
            guard Self.isRetryable(error) else { return .doNotRetry }
            if waitsForConnectivity, error.isConnectivityFailure { return .retryWhenConnected }
        } else {
            guard let status = response?.statusCode, retryableHTTPStatusCodes.contains(status) else { return .doNotRetry }
        }
        var wait = delay(forAttempt: attempt)
        if let header = response?.value(forHTTPHeaderField: "Retry-After") {
            guard let asked = Self.retryAfterSeconds(header) else { return .doNotRetry }
            wait = max(wait, asked)
        }
        guard wait.isFinite, wait <= maximumDelay else { return .doNotRetry }
        return .retryAfter(max(0, wait))
    }

    /// The backoff wait before retry number `attempt + 1`, jitter applied.
    public func delay(forAttempt attempt: Int) -> TimeInterval {
        let base = exponentialBackoffScale * pow(exponentialBackoffBase, Double(max(0, attempt)))
        let spread = min(max(jitter, 0), 1)
        let factor = spread > 0 ? Double.random(in: (1 - spread)...(1 + spread)) : 1
        let wait = base * factor
        return wait.isFinite ? max(0, wait) : .infinity
    }

    /// The seconds a `Retry-After` value asks for (RFC 9110 §10.2.3): delta-seconds, or an
    /// HTTP date in any of its three forms (IMF-fixdate, and the obsolete RFC 850 and asctime
    /// forms a recipient must accept; a date in the past means now). Nil when the value is
    /// neither: the response is then not retried.
    public static func retryAfterSeconds(_ value: String, now: Date = Date()) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            return TimeInterval(trimmed) ?? .infinity  // too many digits to represent: forever
        }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

extension SessionError {
    /// A failure that a missing route can cause: a connection that could not be made or was
    /// lost, a name that could not be resolved.
    public var isConnectivityFailure: Bool {
        switch self {
        case .cannotConnect, .networkLost, .dnsFailure: true
        default: false
        }
    }
}
