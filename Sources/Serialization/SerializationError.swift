import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Every error the `Serialization` module throws.
///
/// Validation errors carry the response and the body, as AFNetworking's
/// `AFNetworkingOperationFailingURLResponseErrorKey` / `…DataErrorKey` did; read them with
/// ``response`` and ``data``. The ``description`` names the status code, the content type,
/// the file or the header at fault.
public enum SerializationError: Error, CustomStringConvertible, LocalizedError {
    /// What kind of body could not be decoded.
    public enum BodyKind: String, Sendable, Hashable {
        /// A JSON document (`JSONSerialization`).
        case json = "JSON"
        /// A value decoded with a `JSONDecoder`.
        case decodable = "Decodable JSON"
        /// An XML document.
        case xml = "XML"
        /// A property list.
        case propertyList = "property list"
        /// Text in a character encoding.
        case string = "text"
    }

    /// The response's status code is not in the serializer's `acceptableStatusCodes`.
    case unacceptableStatusCode(Int, response: HTTPURLResponse, data: Data?)
    /// The response's MIME type (nil when it has none) is not in `acceptableContentTypes`.
    case unacceptableContentType(String?, acceptable: Set<String>, response: HTTPURLResponse, data: Data?)
    /// The body is empty (or absent) where the serializer needs one.
    case emptyResponseBody(response: HTTPURLResponse?)
    /// The body could not be decoded as the expected kind; `underlying` is the parser's error.
    case invalidBody(BodyKind, response: HTTPURLResponse?, data: Data?, underlying: (any Error)?)
    /// The serializer's output cannot cross concurrency domains (`XMLParser`, `XMLDocument`),
    /// so it cannot be returned boxed as `any Sendable`. Names the output type.
    case outputNotSendable(String)
    /// The request parameters cannot be encoded (not a dictionary where one is needed,
    /// invalid JSON or property-list objects, an `Encodable` that throws…).
    case invalidParameters(reason: String, underlying: (any Error)?)
    /// A header field name is not an HTTP token, or its value holds CR, LF or another
    /// control character (header injection).
    case invalidHeader(field: String, value: String)
    /// The HTTP method is not an HTTP token.
    case invalidMethod(String)
    /// The URL string cannot be turned into a URL (or holds control characters or spaces).
    case invalidURL(String)
    /// A multipart file part names a file that does not exist.
    case multipartFileNotFound(URL)
    /// A multipart file part was given a URL that is not a `file:` URL.
    case multipartNotAFileURL(URL)
    /// A multipart file part names something that cannot be read as a regular file.
    case multipartFileUnreadable(URL, reason: String)
    /// Reading a multipart body stream (or writing it to a file) failed.
    case multipartStreamFailed(reason: String)

    /// The response the error is about, when there is one.
    public var response: HTTPURLResponse? {
        switch self {
        case .unacceptableStatusCode(_, let response, _): return response
        case .unacceptableContentType(_, _, let response, _): return response
        case .emptyResponseBody(let response): return response
        case .invalidBody(_, let response, _, _): return response
        default: return nil
        }
    }

    /// The response body the error is about, when there is one.
    public var data: Data? {
        switch self {
        case .unacceptableStatusCode(_, _, let data): return data
        case .unacceptableContentType(_, _, _, let data): return data
        case .invalidBody(_, _, let data, _): return data
        default: return nil
        }
    }

    /// The error that caused this one (a parser's or an encoder's), when there is one.
    public var underlyingError: (any Error)? {
        switch self {
        case .invalidBody(_, _, _, let underlying): return underlying
        case .invalidParameters(_, let underlying): return underlying
        default: return nil
        }
    }

    /// A readable, one-line description of the failure.
    public var description: String {
        switch self {
        case .unacceptableStatusCode(let code, let response, _):
            let reason = HTTPURLResponse.localizedString(forStatusCode: code)
            return "Request failed: unacceptable status code \(code) (\(reason))\(Self.urlSuffix(response))"
        case .unacceptableContentType(let type, let acceptable, let response, _):
            let list = acceptable.sorted().joined(separator: ", ")
            return "Request failed: unacceptable content type \(type.map { "\"\($0)\"" } ?? "(none)")"
                + "; acceptable: \(list.isEmpty ? "(none)" : list)\(Self.urlSuffix(response))"
        case .emptyResponseBody(let response):
            let code = response.map { " (status \($0.statusCode))" } ?? ""
            return "Response body is empty\(code) but the serializer needs one"
        case .invalidBody(let kind, _, let data, let underlying):
            let size = data.map { "\($0.count) bytes" } ?? "no data"
            let cause = underlying.map { ": \(Self.describe($0))" } ?? ""
            return "Invalid \(kind.rawValue) body (\(size))\(cause)"
        case .outputNotSendable(let type):
            return "The serializer's output type \(type) is not Sendable and cannot be boxed"
        case .invalidParameters(let reason, let underlying):
            let cause = underlying.map { ": \(Self.describe($0))" } ?? ""
            return "Invalid request parameters: \(reason)\(cause)"
        case .invalidHeader(let field, let value):
            return "Invalid header \(field.debugDescription): value \(value.debugDescription) "
                + "(header names must be tokens; values must not contain CR, LF or control characters)"
        case .invalidMethod(let method):
            return "Invalid HTTP method \(method.debugDescription)"
        case .invalidURL(let string):
            return "Invalid URL \(string.debugDescription)"
        case .multipartFileNotFound(let url):
            return "Multipart file not found: \(url.path)"
        case .multipartNotAFileURL(let url):
            return "Multipart part expects a file URL, got \(url.absoluteString)"
        case .multipartFileUnreadable(let url, let reason):
            return "Multipart file \(url.path) cannot be read: \(reason)"
        case .multipartStreamFailed(let reason):
            return "Multipart body stream failed: \(reason)"
        }
    }

    /// Same as ``description``.
    public var errorDescription: String? { description }

    /// The response's URL, as a suffix for messages.
    private static func urlSuffix(_ response: HTTPURLResponse) -> String {
        response.url.map { " for \($0.absoluteString)" } ?? ""
    }

    /// A short description of an underlying error, preferring a debug description
    /// (Foundation's parsers put the useful detail there).
    private static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        if let detail = nsError.userInfo["NSDebugDescription"] as? String { return detail }
        return String(describing: error)
    }
}
