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
}

/// Decides whether a failed attempt is sent again (Alamofire's `RequestRetrier`), set with
/// `URLSessionManager.requestRetrier`.
///
/// It is asked on the manager's `operationQueue` when an attempt ends with an error (an idle
/// timeout included: `SessionError.timedOut`), or with a response whose status is 400 or more.
/// The resource timeout ends the whole task and is not asked about. A retried task keeps its identity: its handlers are
/// called once, with the last attempt's outcome, and its metrics list every attempt. Never
/// asked for a task that was cancelled, whose body was already streamed to a data handler, or
/// whose request body cannot be sent again.
public protocol RequestRetrier: Sendable {
    /// - Parameters:
    ///   - task: The task.
    ///   - attempt: How many times the task was retried so far (0 after the first attempt).
    ///   - error: The attempt's transport error; nil when a response arrived.
    ///   - response: The attempt's response, if one arrived.
    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision
}
