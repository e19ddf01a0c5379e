import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transfer's rules, as pure decisions over its state and the driver's facts: what
/// follows an ended exchange, and which attempts the retrier is asked about. The state
/// machine's events (`TransferStateMachine.swift`) apply them and move the phase.
extension TransferStateMachine {
    /// The rules, in order of precedence.
    func decide(_ facts: EndFacts) -> EndAction {
        if facts.refusedStaleConnection { return .retryOnFreshConnection }
        // The 417 is the answer when the body cannot go again.
        if facts.expectationRefused { return facts.canReplayBody ? .retryWithoutExpectation : .finish(nil) }
        if facts.hasChallengeForHandler { return .askChallengeHandler }
        if let error = facts.error { return .finish(error) }
        if facts.needsFullDownload { return .restartDownloadFromZero }
        if awaitsResponseDecision && headDisposition == .deliver { return .waitForResponseDecision }
        guard case .redirect(let hop) = headDisposition else { return .finish(nil) }
        guard redirectCount < maximumRedirects else { return .finish(.tooManyRedirects(maximumRedirects)) }
        if hop.keepsBody && !facts.canReplayBody {
            return .finish(.bodyStreamFailed(
                "a redirect that keeps the method needs the request body again, but the body stream was already read and cannot be replayed"))
        }
        return facts.hasRedirectHook ? .askRedirectHook(hop) : .follow(hop)
    }

    /// Whether the retrier is asked about an attempt that ended this way: an error other than
    /// a cancellation, or a status of 400 or more; never once body bytes went to user code or
    /// when the request body cannot be sent again.
    static func asksRetrier(error: SessionError?, status: Int, hasStreamedBody: Bool, canReplayBody: Bool) -> Bool {
        if let error, error == .cancelled || error == .sessionInvalidated { return false }
        guard error != nil || status >= 400 else { return false }
        return !hasStreamedBody && canReplayBody
    }
}
