import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Async forms of the verb methods. Each comes in two shapes:
// - `as: T.self` decodes a `Decodable` from the JSON body (`DecodableResponseSerializer<T>`:
//   2xx and a JSON content type required; an empty body only for `Empty`-like types);
// - `serializer:` returns any serializer's output (`StringResponseSerializer`,
//   `XMLParserResponseSerializer`, `JSONResponseSerializer`…).
// The manager's own `responseSerializer` plays no part: the type or serializer you pass
// decides. Results are `sending`: the value is created in the calling task after the
// transfer and handed to you outright, so non-`Sendable` outputs (`XMLParser`,
// `XMLDocument`, a non-`Sendable` `Decodable` class) are safe. Each has a
// `[String: any Sendable]` overload for mixed dictionary literals, as the callback forms do.
// Cancelling the calling Swift `Task` cancels the transfer with `SessionError.cancelled`.
extension HTTPSessionManager {
    // MARK: GET

    /// Sends a `GET` (parameters in the query string) and decodes the JSON body as `T`.
    ///
    /// ```swift
    /// struct Args: Decodable { let args: [String: String] }
    /// let echoed = try await manager.get("anything", parameters: ["q": "curlew"], as: Args.self)
    /// ```
    ///
    /// - Throws: `SerializationError` when the request cannot be built or the response is
    ///   not acceptable JSON of that shape (carrying the response and the body);
    ///   `SessionError` for the transfer.
    public func get<T: Decodable>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await get(urlString, parameters: parameters, headers: headers, serializer: DecodableResponseSerializer<T>())
    }

    /// `get(_:parameters:headers:as:)` for a dictionary literal.
    public func get<T: Decodable>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await get(urlString, parameters: parameters as (any Sendable)?, headers: headers, as: type)
    }

    /// Sends a `GET` (parameters in the query string) and returns `serializer`'s output.
    ///
    /// - Throws: `SerializationError` when the request cannot be built or `serializer`
    ///   rejects the response; `SessionError` for the transfer.
    public func get<S: ResponseSerialization>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        let request = try request(method: "GET", urlString: urlString, parameters: parameters, headers: headers)
        return try await object(for: request, serializer: serializer)
    }

    /// `get(_:parameters:headers:serializer:)` for a dictionary literal.
    public func get<S: ResponseSerialization>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        try await get(urlString, parameters: parameters as (any Sendable)?, headers: headers, serializer: serializer)
    }

    // MARK: POST

    /// Sends a `POST` (parameters in the body) and decodes the JSON body as `T`.
    ///
    /// ```swift
    /// struct Args: Decodable { let args: [String: String] }
    /// let echoed = try await manager.post("anything", parameters: ["q": "curlew"], as: Args.self)
    /// ```
    ///
    /// - Throws: `SerializationError` when the request cannot be built or the response is
    ///   not acceptable JSON of that shape (carrying the response and the body);
    ///   `SessionError` for the transfer.
    public func post<T: Decodable>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await post(urlString, parameters: parameters, headers: headers, serializer: DecodableResponseSerializer<T>())
    }

    /// `post(_:parameters:headers:as:)` for a dictionary literal.
    public func post<T: Decodable>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await post(urlString, parameters: parameters as (any Sendable)?, headers: headers, as: type)
    }

    /// Sends a `POST` (parameters in the body) and returns `serializer`'s output.
    ///
    /// - Throws: `SerializationError` when the request cannot be built or `serializer`
    ///   rejects the response; `SessionError` for the transfer.
    public func post<S: ResponseSerialization>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        let request = try request(method: "POST", urlString: urlString, parameters: parameters, headers: headers)
        return try await object(for: request, serializer: serializer)
    }

    /// `post(_:parameters:headers:serializer:)` for a dictionary literal.
    public func post<S: ResponseSerialization>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        try await post(urlString, parameters: parameters as (any Sendable)?, headers: headers, serializer: serializer)
    }

    // MARK: PUT

    /// Sends a `PUT` (parameters in the body) and decodes the JSON body as `T`.
    ///
    /// ```swift
    /// struct Args: Decodable { let args: [String: String] }
    /// let echoed = try await manager.put("anything", parameters: ["q": "curlew"], as: Args.self)
    /// ```
    ///
    /// - Throws: `SerializationError` when the request cannot be built or the response is
    ///   not acceptable JSON of that shape (carrying the response and the body);
    ///   `SessionError` for the transfer.
    public func put<T: Decodable>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await put(urlString, parameters: parameters, headers: headers, serializer: DecodableResponseSerializer<T>())
    }

    /// `put(_:parameters:headers:as:)` for a dictionary literal.
    public func put<T: Decodable>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await put(urlString, parameters: parameters as (any Sendable)?, headers: headers, as: type)
    }

    /// Sends a `PUT` (parameters in the body) and returns `serializer`'s output.
    ///
    /// - Throws: `SerializationError` when the request cannot be built or `serializer`
    ///   rejects the response; `SessionError` for the transfer.
    public func put<S: ResponseSerialization>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        let request = try request(method: "PUT", urlString: urlString, parameters: parameters, headers: headers)
        return try await object(for: request, serializer: serializer)
    }

    /// `put(_:parameters:headers:serializer:)` for a dictionary literal.
    public func put<S: ResponseSerialization>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        try await put(urlString, parameters: parameters as (any Sendable)?, headers: headers, serializer: serializer)
    }

    // MARK: PATCH

    /// Sends a `PATCH` (parameters in the body) and decodes the JSON body as `T`.
    ///
    /// ```swift
    /// struct Args: Decodable { let args: [String: String] }
    /// let echoed = try await manager.patch("anything", parameters: ["q": "curlew"], as: Args.self)
    /// ```
    ///
    /// - Throws: `SerializationError` when the request cannot be built or the response is
    ///   not acceptable JSON of that shape (carrying the response and the body);
    ///   `SessionError` for the transfer.
    public func patch<T: Decodable>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await patch(urlString, parameters: parameters, headers: headers, serializer: DecodableResponseSerializer<T>())
    }

    /// `patch(_:parameters:headers:as:)` for a dictionary literal.
    public func patch<T: Decodable>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await patch(urlString, parameters: parameters as (any Sendable)?, headers: headers, as: type)
    }

    /// Sends a `PATCH` (parameters in the body) and returns `serializer`'s output.
    ///
    /// - Throws: `SerializationError` when the request cannot be built or `serializer`
    ///   rejects the response; `SessionError` for the transfer.
    public func patch<S: ResponseSerialization>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        let request = try request(method: "PATCH", urlString: urlString, parameters: parameters, headers: headers)
        return try await object(for: request, serializer: serializer)
    }

    /// `patch(_:parameters:headers:serializer:)` for a dictionary literal.
    public func patch<S: ResponseSerialization>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        try await patch(urlString, parameters: parameters as (any Sendable)?, headers: headers, serializer: serializer)
    }

    // MARK: DELETE

    /// Sends a `DELETE` (parameters in the query string) and decodes the JSON body as `T`.
    ///
    /// ```swift
    /// struct Args: Decodable { let args: [String: String] }
    /// let echoed = try await manager.delete("anything", parameters: ["q": "curlew"], as: Args.self)
    /// ```
    ///
    /// - Throws: `SerializationError` when the request cannot be built or the response is
    ///   not acceptable JSON of that shape (carrying the response and the body);
    ///   `SessionError` for the transfer.
    public func delete<T: Decodable>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await delete(urlString, parameters: parameters, headers: headers, serializer: DecodableResponseSerializer<T>())
    }

    /// `delete(_:parameters:headers:as:)` for a dictionary literal.
    public func delete<T: Decodable>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, as type: T.Type
    ) async throws -> sending T {
        try await delete(urlString, parameters: parameters as (any Sendable)?, headers: headers, as: type)
    }

    /// Sends a `DELETE` (parameters in the query string) and returns `serializer`'s output.
    ///
    /// - Throws: `SerializationError` when the request cannot be built or `serializer`
    ///   rejects the response; `SessionError` for the transfer.
    public func delete<S: ResponseSerialization>(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        let request = try request(method: "DELETE", urlString: urlString, parameters: parameters, headers: headers)
        return try await object(for: request, serializer: serializer)
    }

    /// `delete(_:parameters:headers:serializer:)` for a dictionary literal.
    public func delete<S: ResponseSerialization>(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil, serializer: S
    ) async throws -> sending S.Output {
        try await delete(urlString, parameters: parameters as (any Sendable)?, headers: headers, serializer: serializer)
    }

    // MARK: Multipart POST

    /// Sends a streamed `multipart/form-data` `POST` (see
    /// `post(_:parameters:headers:constructingBodyWith:progress:success:failure:)`) and
    /// decodes the JSON body as `T`.
    ///
    /// - Throws: what `block` throws, unchanged; `SerializationError` when the request cannot
    ///   be built or the response is not acceptable; `SessionError` for the transfer.
    public func post<T: Decodable>(
        _ urlString: String, parameters: [String: any Sendable]? = nil, headers: [String: String]? = nil,
        constructingBodyWith block: ((any MultipartFormData) throws -> Void)?, as type: T.Type
    ) async throws -> sending T {
        try await post(
            urlString, parameters: parameters, headers: headers, constructingBodyWith: block,
            serializer: DecodableResponseSerializer<T>())
    }

    /// Sends a streamed `multipart/form-data` `POST` and returns `serializer`'s output.
    ///
    /// - Throws: what `block` throws, unchanged; `SerializationError` when the request cannot
    ///   be built or `serializer` rejects the response; `SessionError` for the transfer.
    public func post<S: ResponseSerialization>(
        _ urlString: String, parameters: [String: any Sendable]? = nil, headers: [String: String]? = nil,
        constructingBodyWith block: ((any MultipartFormData) throws -> Void)?, serializer: S
    ) async throws -> sending S.Output {
        let request = try multipartRequest(urlString: urlString, parameters: parameters, headers: headers, block: block)
        let response = try await perform { completion in
            let options = TaskOptions.asyncCall(completionHandler: completion)
            return engine.makeTask(UploadTask.self, request: request, options: options)
        }
        return try serializer.engineResponseObject(
            for: response.request ?? request, head: response.head, data: response.data)
    }

    // MARK: HEAD

    /// Sends a `HEAD` and returns the response once the manager's `responseSerializer` has
    /// accepted it (status code and content type; the empty body is valid for `HEAD`).
    ///
    /// Named apart from `head(_:parameters:headers:success:failure:)`, whose arguments are
    /// all optional, so that neither call is ambiguous inside `async` code.
    ///
    /// - Throws: `SerializationError` when the request cannot be built or the response is not
    ///   acceptable; `SessionError` for the transfer.
    public func headResponse(
        _ urlString: String, parameters: (any Sendable)? = nil, headers: [String: String]? = nil
    ) async throws -> HTTPURLResponse {
        let request = try request(method: "HEAD", urlString: urlString, parameters: parameters, headers: headers)
        let response = try await perform { completion in
            let options = TaskOptions.asyncCall(completionHandler: completion)
            return engine.makeTask(DataTask.self, request: request, options: options)
        }
        guard let http = response.response else { throw SessionError.badServerResponse("no HTTP response") }
        try Self.validate(response, request: request, with: responseSerializer)
        return http
    }

    /// `headResponse(_:parameters:headers:)` for a dictionary literal.
    public func headResponse(
        _ urlString: String, parameters: [String: any Sendable]?, headers: [String: String]? = nil
    ) async throws -> HTTPURLResponse {
        try await headResponse(urlString, parameters: parameters as (any Sendable)?, headers: headers)
    }

    /// Runs `serializer` for its checks only; its output (which need not be `Sendable`) is
    /// dropped where it was made.
    private static func validate<S: ResponseSerialization>(
        _ response: DataResponse, request: URLRequest, with serializer: S
    ) throws {
        _ = try serializer.engineResponseObject(
            for: response.request ?? request, head: response.head, data: response.data)
    }
}
