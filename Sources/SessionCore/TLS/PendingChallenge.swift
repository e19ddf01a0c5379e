import Foundation
import Serialization
import Security
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A challenge the driver hands to the manager's authentication challenge handler: built on
/// the driver thread from what the transfer recorded, turned into a Foundation
/// `URLAuthenticationChallenge` on the operation queue.
struct PendingChallenge: @unchecked Sendable {
    // @unchecked: HTTPURLResponse is an immutable value once built; the struct is handed
    // from the driver to the operation queue once and never mutated.

    enum Kind {
        /// The policy refused this chain during the handshake (nothing was sent).
        case serverTrust(ServerTrust, TrustEvaluationError)
        /// The server answered 401 with a `WWW-Authenticate` challenge Curlew can answer.
        case http(scheme: HTTPAuthenticationScheme, realm: String?)
    }

    let kind: Kind
    /// The request URL the challenge arose for: its origin is what an answer is bound to.
    let url: URL
    let host: String
    let port: Int
    let scheme: String
    let previousFailureCount: Int
    /// The 401's head; Foundation's response is built from it off the driver thread.
    let failureResponse: HTTPResponseHead?

    /// The Foundation challenge the handler receives.
    func makeChallenge() -> URLAuthenticationChallenge {
        let space: URLProtectionSpace
        var error: (any Error)?
        switch kind {
        case .serverTrust(let trust, let failure):
            space = ServerTrustProtectionSpace(host: host, port: port, protocol: scheme, serverTrust: trust)
            error = SessionError.serverTrustEvaluationFailed(reason: failure)
        case .http(let authScheme, let realm):
            space = URLProtectionSpace(
                host: host, port: port, protocol: scheme, realm: realm,
                authenticationMethod: authScheme.authenticationMethod)
        }
        return URLAuthenticationChallenge(
            protectionSpace: space, proposedCredential: nil, previousFailureCount: previousFailureCount,
            failureResponse: failureResponse?.httpURLResponse, error: error, sender: IgnoringChallengeSender())
    }
}

/// HTTP authentication schemes Curlew answers from a challenge handler. libcurl does the
/// work: Basic, and Digest (RFC 7616: MD5 and SHA-256, `qop=auth`), whose second pass —
/// unauthenticated request, 401 with a nonce, authenticated request — curl makes itself.
enum HTTPAuthenticationScheme: Sendable, Equatable, Hashable {
    case basic
    case digest

    var authenticationMethod: String {
        switch self {
        case .basic: return NSURLAuthenticationMethodHTTPBasic
        case .digest: return NSURLAuthenticationMethodHTTPDigest
        }
    }

    /// The `CURLAUTH_*` bit (cast macros Swift cannot import): exactly one method, so curl
    /// never falls back to a weaker one than the server asked for.
    var curlAuthBit: Int {
        switch self {
        case .basic: return 1 << 0  // CURLAUTH_BASIC
        case .digest: return 1 << 1  // CURLAUTH_DIGEST
        }
    }

    /// The strongest scheme Curlew can answer among the challenges of a `WWW-Authenticate`
    /// value (several may be folded into one, comma-separated), with its realm.
    static func parse(_ field: String) -> (scheme: HTTPAuthenticationScheme, realm: String?)? {
        let parts = field.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        var found: [(scheme: HTTPAuthenticationScheme, realm: String?)] = []
        for (index, part) in parts.enumerated() {
            let lowered = part.lowercased()
            let scheme: HTTPAuthenticationScheme
            let nameLength: Int
            if lowered == "basic" || lowered.hasPrefix("basic ") {
                (scheme, nameLength) = (.basic, 5)
            } else if lowered == "digest" || lowered.hasPrefix("digest ") {
                (scheme, nameLength) = (.digest, 6)
            } else {
                continue
            }
            // The realm is a parameter of this challenge: in this part or one of the next
            // ones, before the next scheme begins.
            var candidates = [String(part.dropFirst(nameLength))]
            for next in parts.dropFirst(index + 1) {
                let lowerNext = next.lowercased()
                if lowerNext.hasPrefix("basic") || lowerNext.hasPrefix("digest") || !next.contains("=") { break }
                candidates.append(next)
            }
            found.append((scheme, candidates.lazy.compactMap(realm(in:)).first))
        }
        return found.first { $0.scheme == .digest } ?? found.first
    }

    private static func realm(in parameter: String) -> String? {
        let trimmed = parameter.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("realm=") else { return nil }
        let value = trimmed.dropFirst(6)
        guard value.first == "\"" else { return String(value) }
        return String(value.dropFirst().prefix { $0 != "\"" })
    }
}

/// The credentials a challenge handler supplied for the next attempt.
struct ChallengeCredential: Sendable {
    /// The URL whose origin the credential answers; it is never sent to another origin.
    let url: URL
    let user: String
    let password: String
    let scheme: HTTPAuthenticationScheme
}

/// Curlew answers challenges through the handler's return value; the Foundation sender
/// protocol is only there because `URLAuthenticationChallenge` requires one.
final class IgnoringChallengeSender: NSObject, URLAuthenticationChallengeSender {
    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {}
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {}
    func cancel(_ challenge: URLAuthenticationChallenge) {}
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) {}
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {}
}
