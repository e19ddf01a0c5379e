import Foundation

/// An error a request interceptor ended a task with, as event monitors and logs see it
/// (`SessionError.interceptorFailed`). The task's `error` and its response's result carry
/// ``underlying`` itself, so callers catch their own error types.
public struct InterceptorFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the error came from.
    public enum Stage: Sendable, Hashable {
        /// A ``RequestAdapter`` threw: the request was never sent (or not sent again).
        case adaptation
        /// A ``RequestRetrier`` threw or answered ``RetryDecision/doNotRetryWithError(_:)``.
        case retry
    }

    /// Where the error came from.
    public let stage: Stage
    /// The error exactly as the interceptor threw or returned it.
    public let underlying: any Error

    /// Wraps `underlying`, thrown at `stage`.
    public init(stage: Stage, underlying: any Error) {
        self.stage = stage
        self.underlying = underlying
    }

    /// Same stage, and errors of the same type with the same description (errors are not
    /// `Equatable` in general; this is what a log line could tell apart).
    public static func == (lhs: InterceptorFailure, rhs: InterceptorFailure) -> Bool {
        lhs.stage == rhs.stage
            && ObjectIdentifier(type(of: lhs.underlying)) == ObjectIdentifier(type(of: rhs.underlying))
            && String(reflecting: lhs.underlying) == String(reflecting: rhs.underlying)
    }

    /// "The request adapter failed: …" or "The request retrier failed: …".
    public var description: String {
        switch stage {
        case .adaptation: return "The request adapter failed: \(underlying)"
        case .retry: return "The request retrier failed the task: \(underlying)"
        }
    }
}

extension SessionError {
    /// The error a caller sees: an interceptor's own error unwrapped, any other as it is.
    var surfaced: any Error {
        if case .interceptorFailed(let failure) = self { return failure.underlying }
        return self
    }
}
