import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Building each verb's request and running its task (the verbs themselves are in the class,
/// where subclasses can override them).
extension HTTPSessionManager {
    // MARK: - Building requests

    /// The absolute URL string for `urlString`: resolved against ``baseURL``, or as is.
    ///
    /// - Throws: ``SerializationError/invalidURL(_:)`` for spaces or control characters (which
    ///   Foundation would silently percent-encode), or a result without a scheme.
    func absoluteURLString(for urlString: String) throws -> String {
        guard HTTPHeaderValidation.isValidURLString(urlString) else { throw SerializationError.invalidURL(urlString) }
        let resolved: URL?
        if let baseURL {
            // AFNetworking's `URLWithString:relativeToURL:` gives the base URL for "".
            resolved = urlString.isEmpty ? baseURL : URL(string: urlString, relativeTo: baseURL)
        } else {
            resolved = URL(string: urlString)
        }
        guard let resolved, resolved.scheme != nil else { throw SerializationError.invalidURL(urlString) }
        return resolved.absoluteString
    }

    /// The request for a verb method: serialized, then `headers` set over the serializer's.
    func request(
        method: String, urlString: String, parameters: (any Sendable)?, headers: [String: String]?
    ) throws -> URLRequest {
        let absolute = try absoluteURLString(for: urlString)
        var request = try requestSerializer.request(method: method, urlString: absolute, parameters: parameters)
        try Self.apply(headers, to: &request)
        return request
    }

    /// The streamed multipart request for `post(_:parameters:headers:constructingBodyWith:…)`.
    func multipartRequest(
        urlString: String, parameters: [String: any Sendable]?, headers: [String: String]?,
        block: ((any MultipartFormData) throws -> Void)?
    ) throws -> URLRequest {
        let absolute = try absoluteURLString(for: urlString)
        var request = try requestSerializer.multipartFormRequest(
            method: "POST", urlString: absolute, parameters: parameters, constructingBodyWith: block)
        try Self.apply(headers, to: &request)
        return request
    }

    /// Sets per-request headers, checked by the serializers' own rule: a CR or LF would let a
    /// caller's value inject a header.
    static func apply(_ headers: [String: String]?, to request: inout URLRequest) throws {
        for (field, value) in headers ?? [:] {
            try HTTPHeaderValidation.validate(field: field, value: value)
            request.setValue(value, forHTTPHeaderField: field)
        }
    }

    // MARK: - Running tasks

    /// Creates a verb's data task through the overridable `dataTask(withHTTPMethod:…)`, as
    /// AFNetworking's verbs do, and resumes it.
    func dataTask(
        method: String, urlString: String, parameters: (any Sendable)?, headers: [String: String]?,
        uploadProgress: (@Sendable (Progress) -> Void)?, downloadProgress: (@Sendable (Progress) -> Void)?,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        let task = dataTask(
            withHTTPMethod: method, urlString: urlString, parameters: parameters, headers: headers,
            uploadProgress: uploadProgress, downloadProgress: downloadProgress, success: success, failure: failure)
        task?.resume()
        return task
    }

    /// Calls `failure` with a nil task on the completion queue, as AFNetworking does, so the
    /// caller's code never runs re-entrantly inside the verb method.
    func reportUnbuildableRequest(_ error: any Error, to failure: (@Sendable (DataTask?, any Error) -> Void)?) {
        guard let failure else { return }
        completionQueue.async { failure(nil, error) }
    }

    /// Routes a finished task's response to `success` (with the serialized value, optional
    /// layers removed) or `failure`.
    static func deliver(
        _ response: DataResponse, task: DataTask?,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) {
        switch response.result {
        case .failure(let error):
            failure?(task, error)
        case .success(let value):
            // The task is always set: completion cannot run before `resume()`, which comes after.
            guard let task else {
                failure?(nil, SessionError.badServerResponse("the task finished before it was recorded"))
                return
            }
            success?(task, OptionalFlattening.nonNone(value))
        }
    }

    /// Base URLs with a path get a trailing slash, so relative strings extend the path.
    static func directoryURL(for url: URL) -> URL {
        guard !url.path.isEmpty, !url.absoluteString.hasSuffix("/") else { return url }
        return url.appendingPathComponent("")
    }

    /// Lets a completion handler name the task it belongs to: the handler is created before
    /// the task. Written once, before `resume()`; read on the completion queue.
    final class TaskReference: Sendable {
        private let storage = Mutex<DataTask?>(nil)

        var task: DataTask? {
            get { storage.withLock { $0 } }
            set { storage.withLock { $0 = newValue } }
        }
    }
}
