import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a ``RequestRetrier`` decides about a failed attempt.
public enum RetryDecision: Sendable, Equatable {
    /// Complete the task with this attempt's outcome.
    case doNotRetry
    /// Send the request again now.
    case retry
    /// Send the request again after this many seconds (a non-finite or negative delay means
    /// do not retry).
    case retryAfter(TimeInterval)
    /// Complete the task with this error instead of the attempt's outcome (a token refresh
    /// that failed): the task's `error` is this error itself.
    case doNotRetryWithError(any Error)
    /// Send the request again as soon as a route to its host exists: at once when there is one,
    /// else when Reachability's monitor sees one appear (the transfer waits detached, bounded by
    /// the resource timeout; monitors hear `taskIsWaitingForConnectivity`). `RetryPolicy`
    /// answers this for connection failures when its `waitsForConnectivity` is on.
    case retryWhenConnected

    /// Equal cases with equal values; two `doNotRetryWithError` decisions are equal when their
    /// errors are (see ``InterceptorFailure``'s equality: same type, same description).
    public static func == (lhs: RetryDecision, rhs: RetryDecision) -> Bool {
        switch (lhs, rhs) {
        case (.doNotRetry, .doNotRetry), (.retry, .retry), (.retryWhenConnected, .retryWhenConnected): return true
        case (.retryAfter(let left), .retryAfter(let right)): return left == right
        case (.doNotRetryWithError(let left), .doNotRetryWithError(let right)):
            return InterceptorFailure(stage: .retry, underlying: left) == InterceptorFailure(stage: .retry, underlying: right)
        default: return false
        }
    }

    /// Whether another attempt was asked for (its request is adapted before the answer is
    /// carried out).
    var asksForAnotherAttempt: Bool {
        switch self {
        case .retry, .retryAfter, .retryWhenConnected: return true
        case .doNotRetry, .doNotRetryWithError: return false
        }
    }
}

/// Decides whether a failed attempt is sent again (Alamofire's `RequestRetrier`), set with
/// `URLSessionManager.requestRetrier` or as part of `URLSessionManager.interceptor`.
///
/// Implement either requirement: the synchronous ``retry(_:attempt:error:response:)`` (the
/// original API), or ``shouldRetry(_:attempt:error:response:)``, which may suspend (refresh a
/// token) and may throw; its default calls the synchronous one. A thrown error is treated as
/// ``RetryDecision/doNotRetryWithError(_:)``.
///
/// It is asked from a Swift concurrency task (never the manager's driver thread) when an
/// attempt ends with an error (an idle timeout included: `SessionError.timedOut`), or with a
/// response whose status is 400 or more; the transfer is detached meanwhile (no connection
/// slot held, no idle timeout running). Decisions about different tasks may be made at the
/// same time. The resource timeout ends the whole task and is not asked about. A retried task
/// keeps its identity: its handlers are called once, with the last attempt's outcome, and its
/// metrics list every attempt. Never asked for a task that was cancelled, whose body was
/// already streamed to a data handler, or whose request body cannot be sent again.
public protocol RequestRetrier: Sendable {
    /// The synchronous decision. The default does not retry.
    ///
    /// - Parameters:
    ///   - task: The task.
    ///   - attempt: How many times the task was retried so far (0 after the first attempt).
    ///   - error: The attempt's transport error; nil when a response arrived.
    ///   - response: The attempt's response, if one arrived.
    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision

    /// The decision, which may suspend and throw (a thrown error fails the task with that
    /// error). The default returns ``retry(_:attempt:error:response:)``. Parameters as there.
    func shouldRetry(
        _ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?
    ) async throws -> RetryDecision
}

extension RequestRetrier {
    /// Never retries (for retriers that implement only the async requirement).
    public func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        .doNotRetry
    }

    /// Calls the synchronous ``retry(_:attempt:error:response:)``, so retriers written against
    /// it need no change.
    public func shouldRetry(
        _ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?
    ) async throws -> RetryDecision {
        retry(task, attempt: attempt, error: error, response: response)
    }
}
