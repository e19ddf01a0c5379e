import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Changes a request before it is sent (Alamofire's `RequestAdapter`), set with
/// `URLSessionManager.requestAdapter`: a fresh token in `Authorization`, a header every request
/// needs. Called on the caller's thread when a task is created (`attempt` 0; the task's
/// `originalRequest` is the adapted request) and on the manager's `operationQueue` before each
/// retry a ``RequestRetrier`` asked for (`attempt` 1, 2, ...). Return the request unchanged to
/// leave it as it is. The adapted request is validated like any other; the request body stays
/// the task's own.
public protocol RequestAdapter: Sendable {
    /// The request to send for `attempt` (0: the first; 1, 2, ...: retries), built from `request`.
    func adapt(_ request: URLRequest, attempt: Int) -> URLRequest
}
