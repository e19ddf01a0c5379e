import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the driver does when one exchange of a transfer ends, decided in one place.
///
/// A pure value, like `TaskLifecycle`: the driver gathers the facts (`TransferEnd.Facts`),
/// asks `TransferEnd.decide(_:)`, and carries the answer out. The same rules decide, when
/// the response head arrives, whether the response is held back from the task (a redirect
/// Curlew may follow, a 401 the challenge handler may answer): `TransferEnd.disposition`.
enum TransferEnd {
    /// What happens to a response whose head just arrived.
    enum HeadDisposition: Equatable {
        /// The response is the task's: progress, the response hook, the body.
        case deliver
        /// A redirect: its body is kept aside (capped) in case it is delivered after all.
        case redirect(RedirectPolicy.Hop)
        /// A 401 the authentication challenge handler will be asked about.
        case challenge
    }

    /// The facts known when an exchange ends.
    struct Facts {
        /// Curlew's own reason or curl's, nil when the exchange completed.
        var error: SessionError?
        /// Refused before sending because the connection or TLS session was verified under
        /// another security policy, and not yet retried on a fresh connection.
        var refusedStaleConnection = false
        /// A challenge (server trust, or the held-back 401) waits for the handler.
        var hasChallengeForHandler = false
        /// What was decided when the head arrived (nil: no head arrived).
        var head: HeadDisposition?
        /// Redirects followed so far.
        var redirectCount = 0
        var maximumRedirects = 16
        /// Whether the request body can be sent again from its start.
        var canReplayBody = true
        /// Whether the manager has a redirection hook.
        var hasRedirectHook = false
        /// The response hook has not answered yet about the delivered response.
        var awaitsResponseDecision = false
        /// A resumed download's range was refused (416) or answered with other bytes.
        var needsFullDownload = false
    }

    /// The action the driver carries out.
    enum Action: Equatable {
        /// Complete the task: with this error, or (nil) with the response as received.
        case finish(SessionError?)
        /// The same request once more, on a new connection with a full handshake.
        case retryOnFreshConnection
        /// Detach and ask the authentication challenge handler; its answer arrives as a command.
        case askChallengeHandler
        /// Send the next hop now.
        case follow(RedirectPolicy.Hop)
        /// Detach and ask the redirection hook; its answer arrives as a command.
        case askRedirectHook(RedirectPolicy.Hop)
        /// Detach and keep the facts until the response hook answers (a response without a
        /// body can end before it does).
        case waitForResponseDecision
        /// Send the download's request again without `If-Range` (the partial bytes stay until
        /// the new answer's body replaces them).
        case restartDownloadFromZero
    }

    /// Decides how a response head is treated. `hop` is the redirect Curlew would follow
    /// (nil when the response is no followable redirect); `challengeable` says that the
    /// response is a 401 the challenge handler can answer.
    static func disposition(hop: RedirectPolicy.Hop?, challengeable: Bool) -> HeadDisposition {
        if let hop { return .redirect(hop) }
        if challengeable { return .challenge }
        return .deliver
    }

    /// Decides what follows an exchange that ended.
    static func decide(_ facts: Facts) -> Action {
        if facts.refusedStaleConnection { return .retryOnFreshConnection }
        if facts.hasChallengeForHandler { return .askChallengeHandler }
        if let error = facts.error { return .finish(error) }
        if facts.needsFullDownload { return .restartDownloadFromZero }
        if facts.awaitsResponseDecision { return .waitForResponseDecision }
        guard case .redirect(let hop) = facts.head else { return .finish(nil) }
        guard facts.redirectCount < facts.maximumRedirects else {
            return .finish(.tooManyRedirects(facts.maximumRedirects))
        }
        if hop.keepsBody && !facts.canReplayBody {
            let status = "a redirect that keeps the method"
            return .finish(.bodyStreamFailed(
                "\(status) needs the request body again, but the body stream was already read and cannot be replayed"))
        }
        return facts.hasRedirectHook ? .askRedirectHook(hop) : .follow(hop)
    }
}
