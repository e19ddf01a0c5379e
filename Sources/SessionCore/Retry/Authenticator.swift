import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A credential an ``AuthenticationInterceptor`` adds to requests: an OAuth access token and
/// what refreshing it needs, for instance.
public protocol AuthenticationCredential: Sendable {
    /// Whether the credential must be refreshed before another request uses it: it expired or
    /// is about to (leave a margin for the request's time on the wire, e.g. a minute).
    var requiresRefresh: Bool { get }
}

/// What an ``AuthenticationInterceptor`` needs to know about one authentication scheme: how a
/// credential goes into a request, how it is refreshed, and how the server says it was refused.
public protocol Authenticator: Sendable {
    /// The credential type.
    associatedtype Credential: AuthenticationCredential

    /// Adds `credential` to `request` (an `Authorization: Bearer …` field, typically).
    func apply(_ credential: Credential, to request: inout URLRequest)

    /// A fresh credential to replace `credential`. Called once for any number of requests that
    /// need it at the same time; the requests wait meanwhile. A thrown error fails every
    /// waiting request with that error.
    func refresh(_ credential: Credential) async throws -> Credential

    /// Whether an attempt of `request` failed because its credential was refused. The default:
    /// a response with status 401.
    func didRequest(_ request: URLRequest, failWith response: HTTPURLResponse?, error: SessionError?) -> Bool

    /// Whether `request` was sent with `credential` (when not, a refusal is about an older
    /// credential: the request is retried with the current one, without another refresh).
    /// The default: applying `credential` to `request` would change none of its header fields.
    func isRequest(_ request: URLRequest, authenticatedWith credential: Credential) -> Bool
}

extension Authenticator {
    /// A response with status 401 (Unauthorized).
    public func didRequest(_ request: URLRequest, failWith response: HTTPURLResponse?, error: SessionError?) -> Bool {
        response?.statusCode == 401
    }

    /// Whether applying `credential` to `request` would leave its header fields as they are.
    public func isRequest(_ request: URLRequest, authenticatedWith credential: Credential) -> Bool {
        var reapplied = request
        apply(credential, to: &reapplied)
        return reapplied.allHTTPHeaderFields == request.allHTTPHeaderFields
    }
}

/// Why an ``AuthenticationInterceptor`` failed a request (a failed refresh fails it with the
/// refresh's own error instead).
public enum AuthenticationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The interceptor has no credential (``AuthenticationInterceptor/credential`` is nil).
    case missingCredential
    /// More refreshes were needed than ``AuthenticationInterceptor/RefreshWindow`` allows
    /// (`maximumRefreshes` within `interval` seconds), or one task was refused more often than
    /// that: the server refuses every credential, and asking again would loop.
    case excessiveRefresh(maximumRefreshes: Int, interval: TimeInterval)

    /// A one-line description.
    public var description: String {
        switch self {
        case .missingCredential:
            return "The request could not be authenticated: there is no credential."
        case .excessiveRefresh(let maximum, let interval):
            return "The credential was refreshed too often (more than \(maximum) times in \(interval) s); the server refuses it."
        }
    }
}
