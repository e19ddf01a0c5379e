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

    /// A sentence for people.
    public var description: String {
        switch self {
        case .missingURL: return "The request has no URL with a scheme and a host."
        case .missingSchemeOrAuthority: return "The HTTPRequest has no :scheme or :authority to make a URL from."
        case .unsupportedTarget(let target): return "The request target '\(target)' cannot be sent."
        case .invalidMethod(let method): return "'\(method)' is not a valid HTTP method."
        case .invalidURL(let url): return "'\(url)' is not a valid URL."
        }
    }

    /// The same as ``description``.
    public var errorDescription: String? { description }
}
