import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A ``RequestAdapter`` and a ``RequestRetrier`` in one value (Alamofire's idea of the same
/// name): what changes requests usually also decides about their failures, as
/// ``AuthenticationInterceptor`` does. Set one with `URLSessionManager.interceptor`; combine
/// several with ``Interceptor``.
public protocol RequestInterceptor: RequestAdapter, RequestRetrier {}

/// Several adapters and retriers as one ``RequestInterceptor``.
///
/// Adapters run in order, each given the previous one's output; the first that throws ends
/// the chain (and the task) with its error. Retriers are asked in order until one answers
/// anything but ``RetryDecision/doNotRetry`` (a retry, a retry after a delay, or
/// ``RetryDecision/doNotRetryWithError(_:)``); that answer is the chain's. A retrier that
/// throws ends the chain as `doNotRetryWithError` with its error.
public struct Interceptor: RequestInterceptor {
    /// The adapters, in the order they run.
    public var adapters: [any RequestAdapter]
    /// The retriers, in the order they are asked.
    public var retriers: [any RequestRetrier]

    /// A chain of `adapters` then each of `interceptors` as an adapter, and of `retriers` then
    /// each of `interceptors` as a retrier.
    public init(
        adapters: [any RequestAdapter] = [], retriers: [any RequestRetrier] = [],
        interceptors: [any RequestInterceptor] = []
    ) {
        self.adapters = adapters + interceptors.map { $0 as any RequestAdapter }
        self.retriers = retriers + interceptors.map { $0 as any RequestRetrier }
    }

    /// The adapters' synchronous requirement, in order.
    public func adapt(_ request: URLRequest, attempt: Int) -> URLRequest {
        adapters.reduce(request) { $1.adapt($0, attempt: attempt) }
    }

    /// Each adapter in order, given the previous one's output.
    public func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest {
        var request = request
        for adapter in adapters {
            request = try await adapter.adapt(request, for: task, attempt: attempt)
        }
        return request
    }

    /// The retriers' synchronous requirement, in order, until one does not answer `doNotRetry`.
    public func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        for retrier in retriers {
            let decision = retrier.retry(task, attempt: attempt, error: error, response: response)
            if decision != .doNotRetry { return decision }
        }
        return .doNotRetry
    }

    /// The retriers in order, until one does not answer `doNotRetry`.
    public func shouldRetry(
        _ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?
    ) async throws -> RetryDecision {
        for retrier in retriers {
            let decision: RetryDecision
            do {
                decision = try await retrier.shouldRetry(task, attempt: attempt, error: error, response: response)
            } catch {
                return .doNotRetryWithError(error)
            }
            if decision != .doNotRetry { return decision }
        }
        return .doNotRetry
    }
}
