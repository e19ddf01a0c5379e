import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Encodes parameters as a URL query (for `GET`, `HEAD`, `DELETE`) or as an
/// `application/x-www-form-urlencoded` body (AFNetworking's `AFHTTPRequestSerializer`).
///
/// Parameters are a dictionary (`[String: any Sendable]`, nested dictionaries, arrays and sets
/// allowed), a ``JSONValue`` object, or an `Encodable` value that encodes as a keyed container.
/// With nil parameters, `GET`, `HEAD` and `DELETE` get the default headers only; other methods
/// also get an empty form body (`Content-Length: 0`), as in AFNetworking.
///
/// ```
/// var serializer = HTTPRequestSerializer()
/// serializer.setValue("application/json", forHTTPHeaderField: "Accept")
/// let request = try serializer.request(method: "GET", urlString: "https://example.com/search",
///                                      parameters: ["q": "curlew"])
/// ```
public struct HTTPRequestSerializer: HTTPRequestSerializing {
    /// The encoding of form bodies and multipart text parts; UTF-8 by default.
    public var stringEncoding: String.Encoding = .utf8
    /// The timeout of new requests; 60 seconds.
    public var timeoutInterval: TimeInterval = 60
    /// The cache policy of new requests; `.useProtocolCachePolicy`.
    public var cachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy
    /// Whether new requests send and store cookies; true.
    public var httpShouldHandleCookies = true
    /// Methods whose parameters go into the URL query; `GET`, `HEAD`, `DELETE`.
    public var httpMethodsEncodingParametersInURI: Set<String> = ["GET", "HEAD", "DELETE"]
    /// The default headers; `Accept-Language` and `User-Agent` to start with.
    public private(set) var httpRequestHeaders: [String: String] = [
        "Accept-Language": DefaultHTTPHeaders.acceptLanguage,
        "User-Agent": DefaultHTTPHeaders.userAgent,
    ]
    /// How parameters become a query string; ``QueryStringSerialization/defaultStyle``.
    public var queryStringSerialization: QueryStringSerialization = .defaultStyle

    /// A serializer with AFNetworking's defaults.
    public init() {}

    /// Sets (or, with nil, removes) a default header, replacing any spelling of the same name.
    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        for key in httpRequestHeaders.keys where key.caseInsensitiveCompare(field) == .orderedSame {
            httpRequestHeaders[key] = nil
        }
        if let value { httpRequestHeaders[field] = value }
    }

    /// Adds the default headers the request lacks, then encodes `parameters` in the query or the body.
    ///
    /// A method that does not put parameters in the URI always gets a form body, an empty one
    /// for nil parameters, as in AFNetworking (an empty string is a valid
    /// `x-www-form-urlencoded` payload): the request then says `Content-Length: 0`, which
    /// servers that demand a length for `POST`, `PUT` and `PATCH` need.
    public func request(bySerializing request: URLRequest, parameters: (any Sendable)?) throws -> URLRequest {
        var request = try applyingDefaultHeaders(to: request)
        var query = ""
        // Like AFNetworking, the query serialization (and a custom closure) runs only for parameters.
        if let parameters, OptionalFlattening.unwrapped(parameters) != nil {
            query = try queryString(for: request, parameters: parameters)
        }
        if encodesParametersInURI(request) {
            return try Self.appendingQuery(query, to: request)
        }
        if request.value(forHTTPHeaderField: "Content-Type") == nil {
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        }
        guard let body = query.data(using: stringEncoding) else {
            throw SerializationError.invalidParameters(
                reason: "the query string cannot be represented in \(stringEncoding)", underlying: nil)
        }
        request.httpBody = body
        return request
    }

    // MARK: Shared with the JSON and property-list serializers

    /// The request with every default header it does not already have; all headers validated.
    func applyingDefaultHeaders(to request: URLRequest) throws -> URLRequest {
        var request = request
        for (field, value) in httpRequestHeaders.sorted(by: { $0.key < $1.key })
        where request.value(forHTTPHeaderField: field) == nil {
            try HTTPHeaderValidation.validate(field: field, value: value)
            request.setValue(value, forHTTPHeaderField: field)
        }
        try HTTPHeaderValidation.validate(request)
        return request
    }

    /// True when the request's method puts parameters in the URL.
    func encodesParametersInURI(_ request: URLRequest) -> Bool {
        let method = (request.httpMethod ?? "GET").uppercased()
        return httpMethodsEncodingParametersInURI.contains { $0.uppercased() == method }
    }

    /// The query string for `parameters` with the configured style or closure.
    func queryString(for request: URLRequest, parameters: any Sendable) throws -> String {
        switch queryStringSerialization {
        case .defaultStyle:
            return try QueryStringEncoder.queryString(fromParameters: parameters)
        case .custom(let closure):
            return try closure(request, parameters)
        }
    }

    /// The request with `query` appended to its URL's query (before any fragment).
    static func appendingQuery(_ query: String, to request: URLRequest) throws -> URLRequest {
        guard !query.isEmpty, let url = request.url else { return request }
        var string = url.absoluteString
        var fragment = ""
        if let hash = string.firstIndex(of: "#") {
            fragment = String(string[hash...])
            string = String(string[..<hash])
        }
        let separator = string.contains("?") ? "&" : "?"
        let combined = string + separator + query + fragment
        guard let newURL = URL(string: combined) else {
            throw SerializationError.invalidURL(combined)
        }
        var request = request
        request.url = newURL
        return request
    }
}
