import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The settings and operations every HTTP request serializer shares (AFNetworking's
/// `AFHTTPRequestSerializer` interface). ``HTTPRequestSerializer``, ``JSONRequestSerializer``
/// and ``PropertyListRequestSerializer`` conform; a session manager holds an
/// `any HTTPRequestSerializing` and edits it in place.
///
/// Conforming types implement the stored settings, ``setValue(_:forHTTPHeaderField:)`` and
/// ``RequestSerialization/request(bySerializing:parameters:)``; the other operations have
/// default implementations built on those.
public protocol HTTPRequestSerializing: RequestSerialization {
    /// The encoding of form bodies and multipart text parts; UTF-8 by default.
    var stringEncoding: String.Encoding { get set }
    /// The `timeoutInterval` of requests made by ``request(method:urlString:parameters:)``; 60 s.
    var timeoutInterval: TimeInterval { get set }
    /// The `cachePolicy` of requests made by ``request(method:urlString:parameters:)``.
    var cachePolicy: URLRequest.CachePolicy { get set }
    /// The `httpShouldHandleCookies` of requests made by ``request(method:urlString:parameters:)``; true.
    var httpShouldHandleCookies: Bool { get set }
    /// Methods whose parameters go into the URL query rather than the body (uppercase):
    /// `GET`, `HEAD`, `DELETE` by default.
    var httpMethodsEncodingParametersInURI: Set<String> { get set }
    /// The headers added to every request that does not set them itself. Starts with
    /// `Accept-Language` and `User-Agent`.
    var httpRequestHeaders: [String: String] { get }
    /// How parameters become a query string.
    var queryStringSerialization: QueryStringSerialization { get set }

    /// Sets (or, with nil, removes) a default header; names are matched without regard to case.
    /// Values are checked when a request is built: CR, LF or another control character makes
    /// the request methods throw ``SerializationError/invalidHeader(field:value:)``.
    mutating func setValue(_ value: String?, forHTTPHeaderField field: String)
    /// The default header named `field` (without regard to case).
    func value(forHTTPHeaderField field: String) -> String?
    /// Sets a Basic `Authorization` header from `username` and `password` (UTF-8, base64).
    mutating func setAuthorizationHeaderField(username: String, password: String)
    /// Removes the `Authorization` header.
    mutating func clearAuthorizationHeader()

    /// A request for `method` and `urlString` with the serializer's settings and headers, and
    /// `parameters` encoded (in the URL for ``httpMethodsEncodingParametersInURI``, in the body
    /// otherwise).
    ///
    /// - Throws: ``SerializationError/invalidURL(_:)``, ``SerializationError/invalidMethod(_:)``,
    ///   ``SerializationError/invalidHeader(field:value:)``,
    ///   ``SerializationError/invalidParameters(reason:underlying:)``.
    func request(method: String, urlString: String, parameters: (any Sendable)?) throws -> URLRequest

    /// A `multipart/form-data` request: each parameter becomes a form part (named with the
    /// query-string rules, `a[b]`), then `block` appends parts. The body is a streamed
    /// ``MultipartBodyStream`` in `httpBodyStream` (`httpBody` is nil), with an exact
    /// `Content-Length` and a random boundary in `Content-Type`.
    ///
    /// - Throws: the errors of ``request(method:urlString:parameters:)``, the block's errors
    ///   unchanged, and ``SerializationError/invalidHeader(field:value:)`` for a part header
    ///   holding CR or LF.
    func multipartFormRequest(
        method: String, urlString: String, parameters: [String: any Sendable]?,
        constructingBodyWith block: ((any MultipartFormData) throws -> Void)?
    ) throws -> URLRequest

    /// Writes the body stream of a multipart request to `fileURL` and returns the request
    /// without its body stream (headers unchanged), ready for an upload from that file. The
    /// original request's stream is left unread when it can be copied.
    func request(withMultipartFormRequest request: URLRequest, writingStreamContentsToFile fileURL: URL)
        async throws -> URLRequest
}

extension HTTPRequestSerializing {
    /// The default header named `field` (without regard to case).
    public func value(forHTTPHeaderField field: String) -> String? {
        if let exact = httpRequestHeaders[field] { return exact }
        return httpRequestHeaders.first { $0.key.caseInsensitiveCompare(field) == .orderedSame }?.value
    }

    /// Sets `Authorization: Basic base64(username:password)`.
    public mutating func setAuthorizationHeaderField(username: String, password: String) {
        let credentials = Data("\(username):\(password)".utf8).base64EncodedString()
        setValue("Basic \(credentials)", forHTTPHeaderField: "Authorization")
    }

    /// Removes the `Authorization` header.
    public mutating func clearAuthorizationHeader() {
        setValue(nil, forHTTPHeaderField: "Authorization")
    }

    /// Builds the request, applies the settings, then calls
    /// ``RequestSerialization/request(bySerializing:parameters:)``.
    public func request(method: String, urlString: String, parameters: (any Sendable)?) throws -> URLRequest {
        guard HTTPHeaderValidation.isToken(method) else { throw SerializationError.invalidMethod(method) }
        guard !urlString.isEmpty, HTTPHeaderValidation.isValidURLString(urlString),
              let url = URL(string: urlString) else {
            throw SerializationError.invalidURL(urlString)
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.timeoutInterval = timeoutInterval
        request.cachePolicy = cachePolicy
        request.httpShouldHandleCookies = httpShouldHandleCookies
        return try self.request(bySerializing: request, parameters: parameters)
    }

    /// The same as the `(any Sendable)?` form, for dictionary literals: a mixed literal such as
    /// `["q": "curlew", "page": 2]` needs this parameter type to type-check as `Sendable`.
    public func request(method: String, urlString: String, parameters: [String: any Sendable]?) throws -> URLRequest {
        let boxed: (any Sendable)? = parameters
        return try request(method: method, urlString: urlString, parameters: boxed)
    }

    /// Builds a streamed `multipart/form-data` request.
    public func multipartFormRequest(
        method: String, urlString: String, parameters: [String: any Sendable]?,
        constructingBodyWith block: ((any MultipartFormData) throws -> Void)?
    ) throws -> URLRequest {
        let upper = method.uppercased()
        guard upper != "GET", upper != "HEAD" else {
            throw SerializationError.invalidParameters(
                reason: "a multipart/form-data body needs a method that carries a body, not \(method)",
                underlying: nil)
        }
        let request = try self.request(method: method, urlString: urlString, parameters: nil)
        let builder = MultipartFormDataBuilder(stringEncoding: stringEncoding)
        if let parameters {
            for pair in try QueryStringEncoder.pairs(fromParameters: parameters) {
                var body = pair.data ?? Data()
                if pair.data == nil, let value = pair.value {
                    // As the URL-encoded form does: a value the encoding cannot write is an
                    // error, never an empty part.
                    guard let encoded = value.data(using: stringEncoding) else {
                        throw SerializationError.invalidParameters(
                            reason: "the value of \(pair.field) cannot be written in \(stringEncoding)", underlying: nil)
                    }
                    body = encoded
                }
                builder.appendPart(withFormData: body, name: pair.field)
            }
        }
        try block?(builder)
        return try builder.requestByFinalizingMultipartFormData(request)
    }

    /// Writes the multipart body to `fileURL` on a background queue.
    public func request(withMultipartFormRequest request: URLRequest, writingStreamContentsToFile fileURL: URL)
        async throws -> URLRequest
    {
        guard request.httpBodyStream != nil else {
            throw SerializationError.invalidParameters(reason: "the request has no body stream to write", underlying: nil)
        }
        guard fileURL.isFileURL else { throw SerializationError.multipartNotAFileURL(fileURL) }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                do {
                    try MultipartBodyStream.writeBody(of: request, to: fileURL)
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
        var result = request
        result.httpBodyStream = nil
        return result
    }
}
