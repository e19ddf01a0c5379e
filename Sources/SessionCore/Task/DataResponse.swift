import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Everything a finished task produced, handed to its completion handler.
public struct DataResponse: Sendable {
    /// The request that was sent last (after redirects).
    public let request: URLRequest?
    /// The final response, if one arrived. Built from ``head`` on first use (Foundation's
    /// `HTTPURLResponse` is costly to make; read ``head`` when the fields are all you need).
    public var response: HTTPURLResponse? { head?.httpURLResponse }
    /// The final response's status line and header fields, as received.
    public let head: HTTPResponseHead?
    /// The response body, when the task collected it.
    public let data: Data?
    /// Where a download task's file ended up.
    public let fileURL: URL?
    /// Timings and connection facts.
    public let metrics: TaskMetrics?
    /// The serialized response object, or the error that ended the task.
    public let result: Result<any Sendable, any Error>
    /// Whether the server's certificate was let in by an authentication challenge handler's
    /// decision (`.useCredential` for server trust) where the security policy refused it. Such
    /// an answer is this task's alone: Curlew's response cache and `ImageDownloader`'s image
    /// cache keep none, and a cache of the caller's should not either.
    public internal(set) var admittedByTrustOverride = false

    /// Creates a response value.
    public init(
        request: URLRequest?, response: HTTPURLResponse?, data: Data?, fileURL: URL?,
        metrics: TaskMetrics?, result: Result<any Sendable, any Error>
    ) {
        self.request = request
        self.head = response.flatMap { HTTPResponseHead($0) }
        self.data = data
        self.fileURL = fileURL
        self.metrics = metrics
        self.result = result
    }

    /// Creates a response value from a response head.
    public init(
        request: URLRequest?, head: HTTPResponseHead?, data: Data?, fileURL: URL?,
        metrics: TaskMetrics?, result: Result<any Sendable, any Error>
    ) {
        self.request = request
        self.head = head
        self.data = data
        self.fileURL = fileURL
        self.metrics = metrics
        self.result = result
    }

    /// The error, if the task failed.
    public var error: (any Error)? {
        if case .failure(let error) = result { return error }
        return nil
    }

    /// The serialized value, if the task succeeded.
    public var value: (any Sendable)? {
        if case .success(let value) = result { return value }
        return nil
    }
}

extension Result {
    /// The error of a failure; nil for a success.
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
