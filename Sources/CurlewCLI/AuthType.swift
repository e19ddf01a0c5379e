import ArgumentParser
import Foundation
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `--auth-type`: how `--auth` credentials are sent.
enum AuthType: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// Basic, in the first request (no round trip).
    case basic
    /// Digest: the server's 401 challenge is answered through the manager's challenge
    /// handler (libcurl computes the response).
    case digest

    /// `USER:PASSWORD` split at the first colon; `USER` alone has an empty password.
    static func split(_ value: String?) -> (user: String, password: String)? {
        guard let value else { return nil }
        guard let colon = value.firstIndex(of: ":") else { return (value, "") }
        return (String(value[..<colon]), String(value[value.index(after: colon)...]))
    }

    /// Answers the first HTTP challenge of each task with the credentials (for that origin
    /// only, as the manager guarantees); a second challenge means they were wrong, and the
    /// 401 is delivered.
    static func answerChallenges(on manager: URLSessionManager, user: String, password: String) {
        manager.setAuthenticationChallengeHandler { _, challenge in
            let method = challenge.protectionSpace.authenticationMethod
            guard method == NSURLAuthenticationMethodHTTPDigest || method == NSURLAuthenticationMethodHTTPBasic,
                challenge.previousFailureCount == 0
            else { return .performDefaultHandling }
            return .useCredential(URLCredential(user: user, password: password, persistence: .none))
        }
    }
}
