import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The values `TransferStateMachine` holds and answers with.
extension TransferStateMachine {
    /// Where the transfer stands. A plain value with no payload, so the checks the driver
    /// makes on every event (and `DriverLoop.transition` before and after each) copy no
    /// reference: what a phase waits with is kept beside it (`pendingEndFacts`,
    /// `pendingError`, `retryDeadline`). Callgrind showed the first version, with payloads,
    /// at ~1k instructions per request in the enum's copy and destroy witnesses.
    enum Phase: Equatable {
        /// Neither in curl nor in line: just created, or between two exchanges (a redirect
        /// followed, a retry) while the driver prepares the next one.
        case ready
        /// In line for a connection slot at its origin (`HostAdmission`).
        case waitingForSlot
        /// In libcurl's multi handle, holding its slot when it needs one.
        case attached
        /// Detached, waiting for user code.
        case awaitingDecision(Decision)
        /// Detached, waiting out a retry's back-off until `retryDeadline` (uptime ns).
        case awaitingRetry
        /// Detached with its next exchange ready (its start, a retry, a redirect's hop, a
        /// challenge's answer) while the caller has the task suspended: it is sent at
        /// `resume()`, not before, and holds no connection slot meanwhile.
        case awaitingResume
        /// Completed; no event moves it again.
        case finished
    }

    /// What a detached transfer waits for.
    enum Decision: Equatable {
        /// The network: the attempt failed for want of a route (`waitsForConnectivity`),
        /// and the transfer waits, detached, for one to appear (its error in `pendingError`).
        case connectivity
        /// The authentication challenge handler.
        case challenge
        /// The redirection hook.
        case redirect
        /// The response hook: the exchange ended before it answered (its facts wait in
        /// `pendingEndFacts`).
        case response
        /// The retrier, about an attempt that ended with `pendingError` (nil: a status >= 400).
        case retrier
    }

    /// What happens to a response whose head just arrived.
    enum HeadDisposition: Equatable {
        /// The response is the task's: progress, the response hook, the body.
        case deliver
        /// A redirect: its body is kept aside (capped) in case it is delivered after all.
        case redirect(RedirectPolicy.Hop)
        /// A 401 the authentication challenge handler will be asked about.
        case challenge
        /// A failure status (400 or more) of a streamed response, held back with its body
        /// (kept aside, capped) until the retrier is asked at the attempt's end; delivered
        /// after all when it declines, or when the body outgrows what may be kept.
        case heldForRetrier
    }

    /// The facts only the driver knows when an exchange ends (the machine knows the rest:
    /// the head's disposition, the redirect count, the response hook).
    struct EndFacts: Equatable {
        /// Curlew's own reason or curl's, nil when the exchange completed.
        var error: SessionError?
        /// Refused before sending because the connection or TLS session was verified under
        /// another security policy, and not yet retried on a fresh connection.
        var refusedStaleConnection = false
        /// A challenge (server trust, or the held-back 401) waits for the handler.
        var hasChallengeForHandler = false
        /// Whether the request body can be sent again from its start.
        var canReplayBody = true
        /// Whether the manager has a redirection hook.
        var hasRedirectHook = false
        /// A resumed download's range was refused (416) or answered with other bytes.
        var needsFullDownload = false
        /// A 417 refused the caller's `Expect: 100-continue` and the exchange was cut at its
        /// head (`TaskDelegate.refusedExpectation`).
        var expectationRefused = false
    }

    /// What the driver does after an exchange ended.
    enum EndAction: Equatable {
        /// The attempt is over: with this error, or (nil) with the response as received
        /// (`attemptEnded` decides whether the retrier is asked).
        case finish(SessionError?)
        /// The same request once more, on a new connection with a full handshake.
        case retryOnFreshConnection
        /// Ask the authentication challenge handler; its answer arrives as a command.
        case askChallengeHandler
        /// Send the next hop now.
        case follow(RedirectPolicy.Hop)
        /// Ask the redirection hook; its answer arrives as a command.
        case askRedirectHook(RedirectPolicy.Hop)
        /// Keep the facts until the response hook answers.
        case waitForResponseDecision
        /// Send the download's request again without `If-Range`.
        case restartDownloadFromZero
        /// Send the request again without the caller's `Expect: 100-continue`, which a 417
        /// refused (RFC 9110 §10.1.1).
        case retryWithoutExpectation
    }

    /// What a body chunk gets.
    enum ChunkVerdict: Equatable {
        /// Take the bytes.
        case take
        /// Pause the transfer in curl (suspended, or the response hook has not answered).
        case pause
    }

    /// What the driver does with the response hook's answer.
    enum ResponseStep: Equatable {
        /// No answer was awaited (a stale or repeated one).
        case ignore
        /// The hook cancelled the task.
        case cancel
        /// The exchange had ended meanwhile: carry out what its facts decide now.
        case endExchange(EndAction, EndFacts)
        /// Let curl continue the paused transfer.
        case continueTransfer
        /// Nothing to do now (suspended: `resume` continues it; detached: attaching does).
        case wait
    }

    /// What the driver does when the caller resumes the task.
    enum ResumeStep: Equatable {
        /// Nothing now (not suspended in curl; whatever the transfer waits for goes on).
        case none
        /// Let curl continue the paused transfer.
        case continueTransfer
        /// Attach the transfer: its next exchange waited for this resume (`.awaitingResume`).
        case attach
    }

    /// What the driver does with the retrier's answer.
    enum RetryStep: Equatable {
        /// No answer was awaited.
        case ignore
        /// Complete the task with the attempt's error (nil: its response).
        case finish(SessionError?)
        /// Send the request again now (`error` is the failed attempt's, for a body that
        /// cannot be replayed).
        case retryNow(error: SessionError?)
        /// Send it again at `deadline`, `delay` seconds from now.
        case retryAt(deadline: UInt64, delay: TimeInterval, error: SessionError?)
        /// Wait (detached) for a route to the host, then send again (`.retryWhenConnected`).
        case awaitRoute(error: SessionError?)
    }
}
