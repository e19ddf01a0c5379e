import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A session manager for an HTTP API: AFNetworking's `AFHTTPSessionManager`.
///
/// Requests are built by ``requestSerializer`` from a URL string relative to ``baseURL``
/// and parameters; responses go through the inherited `responseSerializer` (a
/// `JSONResponseSerializer` by default) before `success` runs. Every callback runs on
/// `completionQueue`.
///
/// ```swift
/// import SessionCore
/// import Serialization
///
/// let manager = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1"))
/// manager.requestSerializer.setValue("Bearer token", forHTTPHeaderField: "Authorization")
/// manager.get("users", parameters: ["page": 2, "q": "curlew"], success: { task, object in
///     print((object as? JSONValue)?["users"] ?? "none")
/// }, failure: { task, error in
///     print(error)
/// })
/// ```
///
/// Each verb method returns the task already resumed, or nil when the request cannot be
/// built (a URL string that does not resolve, parameters the serializer cannot encode, a
/// header with CR/LF): `failure` then runs on `completionQueue` with a nil task and the
/// `SerializationError`. Async overloads (`get(_:parameters:headers:as:)` and friends) return
/// a decoded value instead.
open class HTTPSessionManager: URLSessionManager, @unchecked Sendable {
    // @unchecked Sendable, as URLSessionManager: the only mutable state added here is
    // `requestSerializerState`, a Mutex; `baseURL` is an immutable `let`.

    /// The URL that relative URL strings are resolved against (`URL(string:relativeTo:)`).
    ///
    /// As in AFNetworking, a base URL with a path but no trailing slash gets one, so that
    /// `"users"` on `https://h/v1` gives `https://h/v1/users` rather than `https://h/users`.
    /// A URL string with a leading slash replaces the base path (`"/users"` → `https://h/users`)
    /// and an absolute URL string ignores the base URL.
    public let baseURL: URL?

    /// Guards the request serializer: verb methods read it from any thread.
    private let requestSerializerState: Mutex<any HTTPRequestSerializing>

    /// Builds every request; an `HTTPRequestSerializer` (form and query-string parameters)
    /// by default. Edit it in place — `manager.requestSerializer.setValue("…",
    /// forHTTPHeaderField: "Authorization")` — or replace it (`JSONRequestSerializer()`).
    ///
    /// Each request takes a snapshot when it is built; later edits do not affect it. An
    /// in-place edit is a read followed by a write, so make edits from one thread at a time.
    public var requestSerializer: any HTTPRequestSerializing {
        get { requestSerializerState.withLock { $0 } }
        set { requestSerializerState.withLock { $0 = newValue } }
    }

    /// Creates a manager for `baseURL` (nil: every URL string must be absolute).
    ///
    /// - Parameters:
    ///   - baseURL: Resolves relative URL strings; a trailing slash is added when its path
    ///     has none.
    ///   - configuration: Timeouts, headers and limits for every task.
    ///   - eventMonitors: Observers of every task's events (see `EventMonitor`).
    public init(baseURL: URL?, configuration: SessionConfiguration = .default, eventMonitors: [any EventMonitor] = []) {
        self.baseURL = baseURL.map(Self.directoryURL(for:))
        requestSerializerState = Mutex(HTTPRequestSerializer())
        super.init(configuration: configuration, eventMonitors: eventMonitors)
    }

    /// Creates a manager without a base URL (AFNetworking's `+manager`).
    public convenience override init(configuration: SessionConfiguration = .default, eventMonitors: [any EventMonitor] = []) {
        self.init(baseURL: nil, configuration: configuration, eventMonitors: eventMonitors)
    }

    // MARK: - Verbs

    /// Sends a `GET`; `parameters` go into the query string.
    ///
    /// - Parameters:
    ///   - urlString: Absolute, or relative to ``baseURL``.
    ///   - parameters: Encoded by ``requestSerializer`` (dictionaries, arrays, `Encodable`
    ///     values for the JSON serializer…).
    ///   - headers: Set on this request only, over the serializer's headers.
    ///   - progress: Download progress, on `operationQueue`.
    ///   - success: The task and the response serializer's output (nil for an empty JSON body).
    ///   - failure: The task (nil when the request could not be built) and the error: a
    ///     `SessionError` for the transfer, a `SerializationError` for the request or response.
    /// - Returns: The resumed task, or nil when the request could not be built.
    @discardableResult
    open func get(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil,
        progress: (@Sendable (Progress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        dataTask(
            method: "GET", urlString: urlString, parameters: parameters, headers: headers,
            uploadProgress: nil, downloadProgress: progress, success: success, failure: failure)
    }

    /// Sends a `HEAD`; `success` receives the task only (its `response` holds the headers).
    ///
    /// - Returns: The resumed task, or nil when the request could not be built.
    @discardableResult
    open func head(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil,
        success: (@Sendable (DataTask) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        var taskOnly: (@Sendable (DataTask, (any Sendable)?) -> Void)?
        if let success {
            taskOnly = { task, _ in success(task) }
        }
        return dataTask(
            method: "HEAD", urlString: urlString, parameters: parameters, headers: headers,
            uploadProgress: nil, downloadProgress: nil, success: taskOnly, failure: failure)
    }

    /// Sends a `POST`; `parameters` form the body (form-encoded, JSON or property list,
    /// depending on ``requestSerializer``).
    ///
    /// - Parameters:
    ///   - progress: Upload progress, on `operationQueue`.
    /// - Returns: The resumed task, or nil when the request could not be built.
    @discardableResult
    open func post(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil,
        progress: (@Sendable (Progress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        dataTask(
            method: "POST", urlString: urlString, parameters: parameters, headers: headers,
            uploadProgress: progress, downloadProgress: nil, success: success, failure: failure)
    }

    /// Sends a `multipart/form-data` `POST` whose body is streamed: each parameter becomes a
    /// form part, then `block` appends files, streams and data. Files are read in
    /// buffer-sized chunks as curl sends them, never loaded whole.
    ///
    /// - Parameters:
    ///   - parameters: Form fields (nested with the query-string rules: `a[b]`).
    ///   - block: Appends parts; an error it throws makes the method return nil and call
    ///     `failure` with that error.
    ///   - progress: Upload progress, on `operationQueue`.
    /// - Returns: The resumed task (an `UploadTask`), or nil when the request could not be built.
    @discardableResult
    open func post(
        _ urlString: String, parameters: [String: any Sendable]? = nil, headers: [String: String]? = nil,
        constructingBodyWith block: ((any MultipartFormData) throws -> Void)?,
        progress: (@Sendable (Progress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        let request: URLRequest
        do {
            request = try multipartRequest(urlString: urlString, parameters: parameters, headers: headers, block: block)
        } catch {
            reportUnbuildableRequest(error, to: failure)
            return nil
        }
        let reference = TaskReference()
        let task = uploadTask(withStreamedRequest: request, progress: progress) { response in
            Self.deliver(response, task: reference.task, success: success, failure: failure)
        }
        reference.task = task
        task.resume()
        return task
    }

    /// Sends a `PUT`; `parameters` form the body.
    ///
    /// - Returns: The resumed task, or nil when the request could not be built.
    @discardableResult
    open func put(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        dataTask(
            method: "PUT", urlString: urlString, parameters: parameters, headers: headers,
            uploadProgress: nil, downloadProgress: nil, success: success, failure: failure)
    }

    /// Sends a `PATCH`; `parameters` form the body.
    ///
    /// - Returns: The resumed task, or nil when the request could not be built.
    @discardableResult
    open func patch(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        dataTask(
            method: "PATCH", urlString: urlString, parameters: parameters, headers: headers,
            uploadProgress: nil, downloadProgress: nil, success: success, failure: failure)
    }

    /// Sends a `DELETE`; `parameters` go into the query string (the serializer's
    /// `httpMethodsEncodingParametersInURI` includes `DELETE` by default).
    ///
    /// - Returns: The resumed task, or nil when the request could not be built.
    @discardableResult
    open func delete(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        dataTask(
            method: "DELETE", urlString: urlString, parameters: parameters, headers: headers,
            uploadProgress: nil, downloadProgress: nil, success: success, failure: failure)
    }

    /// Creates a data task for any HTTP method, not resumed (AFNetworking's
    /// `dataTaskWithHTTPMethod:URLString:parameters:headers:uploadProgress:downloadProgress:success:failure:`).
    /// Every verb method but the multipart `post` creates its task here: override it to change
    /// them all. Rules in HTTPSessionManager+DataTask.swift.
    open func dataTask(
        withHTTPMethod method: String, urlString: String, parameters: (any Sendable)? = nil,
        headers: [String: String]? = nil, uploadProgress: (@Sendable (Progress) -> Void)? = nil,
        downloadProgress: (@Sendable (Progress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        makeDataTask(
            method: method, urlString: urlString, parameters: parameters, headers: headers,
            uploadProgress: uploadProgress, downloadProgress: downloadProgress, success: success, failure: failure)
    }

    // MARK: - Dictionary-literal overloads
    //
    // A literal with mixed value types (`["q": "curlew", "page": 2]`) is inferred as
    // `[String: Any]`, which is not `Sendable`; these overloads give it a `Sendable` type to
    // check against. A dictionary argument picks them over the `(any Sendable)?` forms, which
    // they forward to.

    /// `get(_:parameters:headers:progress:success:failure:)` for a dictionary literal.
    @discardableResult
    public func get(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil,
        progress: (@Sendable (Progress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        get(urlString, parameters: parameters as (any Sendable)?, headers: headers, progress: progress,
            success: success, failure: failure)
    }

    /// `head(_:parameters:headers:success:failure:)` for a dictionary literal.
    @discardableResult
    public func head(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil,
        success: (@Sendable (DataTask) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        head(urlString, parameters: parameters as (any Sendable)?, headers: headers, success: success, failure: failure)
    }

    /// `post(_:parameters:headers:progress:success:failure:)` for a dictionary literal.
    @discardableResult
    public func post(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil,
        progress: (@Sendable (Progress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        post(urlString, parameters: parameters as (any Sendable)?, headers: headers, progress: progress,
             success: success, failure: failure)
    }

    /// `put(_:parameters:headers:success:failure:)` for a dictionary literal.
    @discardableResult
    public func put(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        put(urlString, parameters: parameters as (any Sendable)?, headers: headers, success: success, failure: failure)
    }

    /// `patch(_:parameters:headers:success:failure:)` for a dictionary literal.
    @discardableResult
    public func patch(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        patch(urlString, parameters: parameters as (any Sendable)?, headers: headers, success: success, failure: failure)
    }

    /// `delete(_:parameters:headers:success:failure:)` for a dictionary literal.
    @discardableResult
    public func delete(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
        failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
    ) -> DataTask? {
        delete(urlString, parameters: parameters as (any Sendable)?, headers: headers, success: success, failure: failure)
    }
}
