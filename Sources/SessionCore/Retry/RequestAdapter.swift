import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Changes a request before it is sent (Alamofire's `RequestAdapter`), set with
/// `URLSessionManager.requestAdapter` or as part of `URLSessionManager.interceptor`: a fresh
/// token in `Authorization`, a header every request needs.
///
/// Implement either requirement:
/// - ``adapt(_:attempt:)``, synchronous and infallible (the original API);
/// - ``adapt(_:for:attempt:)``, which may suspend (fetch a token) and may throw. Its default
///   calls ``adapt(_:attempt:)``.
///
/// The manager calls ``adapt(_:for:attempt:)`` from a Swift concurrency task, never from its
/// driver thread and never while the transfer holds a connection slot: once when the task
/// starts (`attempt` 0, on `resume()`; the task's `originalRequest` and `currentRequest` then
/// become the adapted request), and before each retry a ``RequestRetrier`` asked for
/// (`attempt` 1, 2, ...). A retry's `request` is the one the first attempt adapted (the
/// caller's, or a redirect's hop as proposed), not what the last attempt sent, so an adapter
/// that appends adds once per attempt. Adaptations of different tasks may run at the same time.
///
/// An error thrown here fails the task without sending it: the task's `error` (and its
/// response's result) is the thrown error itself; event monitors see it wrapped as
/// `SessionError.interceptorFailed` with the ``InterceptorFailure/Stage/adaptation`` stage.
/// The adapted request is validated like any other; the request body stays the task's own.
/// A task cancelled while its request is adapted completes at once with
/// `SessionError.cancelled`; the adapter's answer is then dropped.
public protocol RequestAdapter: Sendable {
    /// The request to send for `attempt` (0: the first; 1, 2, ...: retries), built from `request`.
    /// The default returns `request` unchanged.
    func adapt(_ request: URLRequest, attempt: Int) -> URLRequest

    /// The request to send for `attempt` of `task`, built from `request`; may suspend and throw.
    /// The default returns ``adapt(_:attempt:)``.
    func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest
}

extension RequestAdapter {
    /// Leaves the request as it is (for adapters that implement only the async requirement).
    public func adapt(_ request: URLRequest, attempt: Int) -> URLRequest { request }

    /// Calls the synchronous ``adapt(_:attempt:)``, so adapters written against it need no change.
    public func adapt(_ request: URLRequest, for task: SessionTask, attempt: Int) async throws -> URLRequest {
        adapt(request, attempt: attempt)
    }
}
