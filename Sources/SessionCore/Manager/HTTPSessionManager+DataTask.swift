import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `dataTask(withHTTPMethod:…)`: the data task of any HTTP method, built and not resumed.
extension HTTPSessionManager {
    /// What `dataTask(withHTTPMethod:…)` does (an override may call it through `super`).
    ///
    /// - The request: `urlString` resolved against `baseURL`, serialized by
    ///   `requestSerializer` with `parameters` (in the query string for the serializer's
    ///   `httpMethodsEncodingParametersInURI`, in the body otherwise), then `headers` set over
    ///   the serializer's.
    /// - When the request cannot be built (a URL string that does not resolve, parameters the
    ///   serializer cannot encode, a header value with CR or LF), no task is made: the method
    ///   returns nil and `failure` runs on `completionQueue` with a nil task and the error,
    ///   after the call returned.
    /// - Otherwise the task is returned suspended, as every new task is: nothing is sent until
    ///   `resume()`. It ends with `success` (the task and `responseSerializer`'s output) or
    ///   `failure` (the task and the error), on `completionQueue`.
    func makeDataTask(
        method: String, urlString: String, parameters: (any Sendable)?, headers: [String: String]?,
        uploadProgress: (@Sendable (Progress) -> Void)?, downloadProgress: (@Sendable (Progress) -> Void)?,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        let request: URLRequest
        do {
            request = try self.request(method: method, urlString: urlString, parameters: parameters, headers: headers)
        } catch {
            reportUnbuildableRequest(error, to: failure)
            return nil
        }
        // The handler names its task, which exists only once `dataTask(with:…)` returned; the
        // task cannot complete before the caller resumes it, after this assignment.
        let reference = TaskReference()
        let task = dataTask(with: request, uploadProgress: uploadProgress, downloadProgress: downloadProgress) { response in
            Self.deliver(response, task: reference.task, success: success, failure: failure)
        }
        reference.task = task
        return task
    }

    /// `dataTask(withHTTPMethod:urlString:parameters:headers:uploadProgress:downloadProgress:success:failure:)`
    /// for a dictionary literal with mixed value types (`["q": "curlew", "page": 2]`).
    public func dataTask(
        withHTTPMethod method: String, urlString: String, parameters: [String: any Sendable]?,
        headers: [String: String]? = nil, uploadProgress: (@Sendable (Progress) -> Void)? = nil,
        downloadProgress: (@Sendable (Progress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        dataTask(
            withHTTPMethod: method, urlString: urlString, parameters: parameters as (any Sendable)?, headers: headers,
            uploadProgress: uploadProgress, downloadProgress: downloadProgress, success: success, failure: failure)
    }
}
