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

/// HTTP authentication schemes Curlew answers from a challenge handler.
enum HTTPAuthenticationScheme: Sendable, Equatable {
    case basic

    var authenticationMethod: String { NSURLAuthenticationMethodHTTPBasic }

    /// The first scheme Curlew can answer in a `WWW-Authenticate` value (several
    /// challenges may be folded into one, comma-separated), with its realm.
    static func parse(_ field: String) -> (scheme: HTTPAuthenticationScheme, realm: String?)? {
        let parts = field.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for (index, part) in parts.enumerated() {
            let lowered = part.lowercased()
            guard lowered == "basic" || lowered.hasPrefix("basic ") else { continue }
            // The realm is a parameter of this challenge: in this part or the next one.
            let candidates = [String(part.dropFirst(5))] + (index + 1 < parts.count ? [parts[index + 1]] : [])
            return (.basic, candidates.lazy.compactMap(realm(in:)).first)
        }
        return nil
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
