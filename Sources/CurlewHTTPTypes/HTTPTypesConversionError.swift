import Foundation

/// Why a request or response could not be converted between Foundation's and
/// swift-http-types' forms.
public enum HTTPTypesConversionError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// The request has no URL, or its URL has no scheme or host.
    case missingURL
    /// The `HTTPRequest` has no `:scheme` or `:authority` (both are needed to make a URL).
    case missingSchemeOrAuthority
    /// The request's target cannot be sent by Curlew (an asterisk-form `OPTIONS *`, an
    /// extended CONNECT's `:protocol`).
    case unsupportedTarget(String)
    /// The method is not a valid HTTP token.
    case invalidMethod(String)
    /// The URL made from the pseudo-header fields is not valid.
    case invalidURL(String)
    /// A header field's name is not an RFC 9110 token, or its value (spaces and tabs around it
    /// aside) holds a character a field cannot carry (a control character such as CR, LF,
    /// NUL or DEL): it cannot be sent as it is, and is not dropped or changed without a word.
    case invalidHeaderField(String)
    /// A `Host` field names another host than the request's authority (`:authority`, or the
    /// URL's host and port), compared without case, brackets, a trailing dot or the default port. RFC 9113 §8.3.1 forbids the pair; libcurl would send the field
    /// and pick the cookie jar's cookies by it.
    case conflictingHostField(String)

    /// A sentence for people.
    public var description: String {
        switch self {
        case .missingURL: return "The request has no URL with a scheme and a host."
        case .missingSchemeOrAuthority: return "The HTTPRequest has no :scheme or :authority to make a URL from."
        case .unsupportedTarget(let target): return "The request target '\(target)' cannot be sent."
        case .invalidMethod(let method): return "'\(method)' is not a valid HTTP method."
        case .invalidURL(let url): return "'\(url)' is not a valid URL."
        case .invalidHeaderField(let name): return "The header field '\(name)' cannot be sent as it is."
        case .conflictingHostField(let host): return "The Host field '\(host)' names another host than the request's authority."
        }
    }

    /// The same as ``description``.
    public var errorDescription: String? { description }
}
