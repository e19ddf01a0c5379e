import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Everything a finished task produced, handed to its completion handler.
public struct DataResponse: Sendable {
    /// The request that was sent last (after redirects).
    public let request: URLRequest?
    /// The final response, if one arrived.
    public let response: HTTPURLResponse?
    /// The response body, when the task collected it.
    public let data: Data?
    /// Where a download task's file ended up.
    public let fileURL: URL?
    /// Timings and connection facts.
    public let metrics: TaskMetrics?
    /// The serialized response object, or the error that ended the task.
    public let result: Result<any Sendable, any Error>

    /// Creates a response value.
    public init(
        request: URLRequest?, response: HTTPURLResponse?, data: Data?, fileURL: URL?,
        metrics: TaskMetrics?, result: Result<any Sendable, any Error>
    ) {
        self.request = request
        self.response = response
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
