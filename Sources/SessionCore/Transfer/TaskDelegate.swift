import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The per-task delegate (AFNetworking's `AFURLSessionManagerTaskDelegate`): owns one running
/// transfer's easy handle, body reader, response head, body buffer and metrics.
///
/// Confinement: created, used and released on the owning `TransferDriver`'s thread only.
/// curl's callbacks reach it through `CurlCallbacks` while it is retained by the driver.
final class TaskDelegate {
    /// What the write callback tells curl.
    enum WriteDecision { case accepted, pause, abort }

    let task: SessionTask
    let easy: EasyHandle
    let engine: SessionEngine
    /// The request as sent now (a redirect or retry replaces it). Driver thread only, like
    /// `body` (see DriverLoop.delegates): without the dynamic check, which each read as an
    /// argument paid (~180 instructions, twice per request).
    @exclusivity(unchecked) var request: URLRequest
    /// The request a redirect's hop sent before any adapter ran for it (the proposed hop, or
    /// the redirection hook's); nil on the first hop. What a retry adapts again.
    var redirectHop: URLRequest?
    var prepared: PreparedRequest
    var bodyReader: BodyReader?
    /// This exchange's `http://` URL may be sent as `https://` by libcurl's HSTS engine: the
    /// TLS policy is installed for it too (`TaskDelegate+Configuration.swift`).
    var mayBecomeHTTPS = false
    /// A download task's file (nil for data tasks, unless the response hook turned the data
    /// task into a download): the delivered body goes there.
    var download: DownloadFile?
    /// The handle's parser, reset for this transfer (its buffers outlive the transfer).
    let head: ResponseHeadParser
    /// The current exchange's response head, once complete (Foundation's `HTTPURLResponse`
    /// is built from it only when someone asks, off this thread).
    var responseHead: HTTPResponseHead?
    /// The body collected for the completion handler (only when one wants it).
    @exclusivity(unchecked) var body = ResponseBody()  // driver thread only, see DriverLoop.delegates
    /// Set by a callback that aborted the transfer for a reason of Curlew's own; it wins over
    /// the `CURLcode` that follows the abort.
    var failure: SessionError?
    @exclusivity(unchecked) var transactions: [TransactionMetrics] = []
    let startDate = Date()
    /// When the transfer started on the timeouts' clock: the pass's reading (`PassClock`),
    /// taken just before this pass's commands were handled, not a clock read of its own.
    let startUptime: UInt64
    var bodyBytesDelivered: Int64 = 0
    /// Decoded body bytes of this exchange, delivered or held back (the bomb guard counts
    /// every body, a redirect's and a held-back 401's too).
    var decodedBodyBytes: Int64 = 0
    var isContentEncoded = false
    /// The write callback's last answer was a pause: libcurl now keeps the rest of what it
    /// read, decoded, in a buffer of its own (`pausedDecodingOverflow`).
    var lastWritePaused = false
    /// The body is chunked (`Transfer-Encoding`): libcurl 7.88 counts a read's received bytes
    /// only after it wrote what they decoded to, so during a write the count misses up to one
    /// read (`encodedBodyBytesBound`). The parser holds the current response's head until the
    /// next one begins (trailers do not touch it).
    var receivedCountLagsARead: Bool { head.hasTransferCoding }
    /// What a read can hold at most: the buffer libcurl reads this transfer with
    /// (`EasyHandle.receiveBufferSize`, which may not be the size this transfer asked for).
    var receiveBufferBytes: Int64 = 16 << 10
    /// libcurl is handing over what it kept during a pause (inside `DriverLoop.unpause`): the
    /// reads those bytes came from were counted when they ended.
    var replaysPausedBody = false
    /// Whether libcurl is asked for content codings and decodes them in this exchange. A
    /// range of a content-coded representation would be a range of other bytes: a download's
    /// resumed part, and a range the caller asked for (`PreparedRequest.acceptEncoding` nil),
    /// are asked for as is. The one rule for `configure` and for the head's announced length.
    var decodesBody: Bool { prepared.acceptEncoding != nil && !(download?.asksForRange ?? false) }
    /// The transfer's phase, pauses, head disposition, counts and clocks: every decision
    /// about what happens next is made there (`TransferStateMachine`). Touched on every
    /// chunk and only on this thread: unchecked like `body`.
    @exclusivity(unchecked) var state: TransferStateMachine
    /// The driver loop's time for this pass: curl's callbacks mark activity with it.
    let passClock: PassClock
    /// The retained reference handed to curl; released by the driver after removal.
    var unmanagedSelf: UnsafeMutableRawPointer?
    /// The origin whose connection slot this transfer holds or waits for (`HostAdmission`);
    /// nil when it is not counted (multiplexed, or no per-host limit). Given up when the
    /// phase leaves `.attached` or `.waitingForSlot` (`DriverLoop.transition`).
    var admissionOrigin: HostAdmission.Origin?
    /// Whether the response hook is asked about this transfer's delivered response (a data
    /// task, with the hook set when the transfer started).
    let asksResponseHook: Bool
    /// The most body bytes this task keeps in memory (`maximumCollectedBodyBytes`); 0 when it
    /// collects no body or the configuration sets no limit. Read once per task, not per chunk.
    let collectedBodyLimit: Int64
    /// Whether body bytes already went to user code (such an attempt cannot be retried).
    /// A streamed response's head counts too: `bytes(for:)` has already returned it.
    var hasStreamedBody: Bool { deliversBody && (bodyBytesDelivered > 0 || headWentToStream) }
    /// A streamed response (`bytes(for:)`): where the head and chunks go (nil otherwise).
    let responseStream: ResponseStreamBuffer?
    /// The delivered head went to ``responseStream``'s consumer.
    var headWentToStream = false
    /// Whether body chunks go to user code (a data handler, or the data-received hook as it
    /// was when the transfer started): asked once, not under the engine's lock per chunk.
    let deliversBody: Bool
    /// The data-received hook as it was when the transfer started (nil for other tasks).
    let dataReceivedHook: (@Sendable (DataTask, Data) -> Void)?
    /// Streaming: bytes handed to user code and not yet consumed (backpressure); nil when
    /// no chunk goes to user code.
    let streamCredit: StreamCredit?
    /// The wait for a route, while the transfer is detached for it; cancelled when the task
    /// ends any other way (cancel, resource timeout) so that no watcher outlives its task.
    var connectivityWait: ConnectivityWait? {
        willSet { if newValue !== connectivityWait { connectivityWait?.cancel() } }
    }
    /// Set once a redirect crossed origins: credentials from the configuration stay behind.
    /// The task's own flag, which its interceptor reads too.
    var hasCrossedOrigin: Bool {
        get { task.hasCrossedOrigin.load(ordering: .relaxed) }
        set { task.hasCrossedOrigin.store(newValue, ordering: .relaxed) }
    }
    /// Set once the request was sent again because the kept-alive connection it went out on
    /// was lost before any answer (`DriverLoop.lostReusedConnection`): at most once per task.
    var resentAfterLostReusedConnection = false
    /// This exchange was cut at a 417 that refused the caller's `Expect: 100-continue`
    /// (`refusesExpectation`).
    var refusedExpectation = false
    /// The request goes without the caller's `Expect` from now on: a 417 refused it.
    var dropsExpectation = false
    /// An HTTP/2 success ended whole while the request body's producer was behind: the read
    /// callback ends the exchange instead of sending the rest (`didProgress`), and the task
    /// completes with the answer.
    var answeredWhole = false
    /// The read callback found answer bytes held (`answeredWhole`) and paused again: the send
    /// pause is lifted once they are handed over.
    var answeredWholeWaits = false
    /// A response held back at its head (a redirect the hook may refuse, a 401 a challenge
    /// handler may answer) had more body than is kept for it (`heldBodyLimit`): should it
    /// turn out to be the answer after all, its body is not whole.
    var heldBodyWasCut = false
    /// The most body bytes kept for a held-back response of a download or a stream, or of
    /// a redirect: small, since a redirect followed or a challenge answered drops them.
    static let smallHeldBodyLimit = 1 << 20

    /// The most body bytes kept for a held-back response: for a 401 to a task that collects
    /// its body, what it would keep of it as its answer (its `collectedBodyLimit`; none
    /// configured: all of it); ``smallHeldBodyLimit`` otherwise (at most the task's limit):
    /// a redirect's body is the answer only when the hook refuses the hop.
    var heldBodyLimit: Int64 {
        let small = Int64(Self.smallHeldBodyLimit)
        guard download == nil, task.options.collectsBody else { return small }
        let limit = collectedBodyLimit > 0 ? collectedBodyLimit : .max
        if case .redirect? = state.headDisposition { return min(limit, small) }
        return limit
    }

    /// The error for a held-back response that turned out to be the answer with a body cut
    /// at ``heldBodyLimit``, when that body would reach the caller: a collecting task's data,
    /// a stream's bytes, or a download's file (not a download made from resume data, whose
    /// error answers are never written: it fails with `resumeFailed`). Nil otherwise.
    var heldBodyFailure: SessionError? {
        guard heldBodyWasCut, !state.deliversResponse else { return nil }
        if let download { return download.isFromResumeData ? nil : .responseBodyTooLarge(limit: Self.smallHeldBodyLimit) }
        guard task.options.collectsBody || responseStream != nil else { return nil }
        return .responseBodyTooLarge(limit: Int(clamping: heldBodyLimit))
    }
    /// A head the monitors were told of late (held back at its arrival, reported before a
    /// retry or a resend): a retry that then cannot start ends the task with that same head,
    /// and the end must not report it twice (`DriverLoop.reportUnheardHead`).
    var headReportedLate: HTTPResponseHead?
    /// How the current exchange uses the cookie jar, decided when it was configured
    /// (`joinShare`); `.none` without a jar.
    var exchangeCookieUse: CookieUse = .none
    /// TLS enforcement and challenge state (Features/Security: `TransferSecurityState`,
    /// `TaskDelegate+Security.swift`).
    @exclusivity(unchecked) var securityState = TransferSecurityState()

    deinit { connectivityWait?.cancel() }

    init(
        task: SessionTask, easy: EasyHandle, engine: SessionEngine, prepared: PreparedRequest,
        passClock: PassClock
    ) throws(SessionError) {
        self.task = task
        self.easy = easy
        self.engine = engine
        self.passClock = passClock
        startUptime = passClock.now
        self.request = task.currentRequest ?? URLRequest(url: prepared.url)
        self.prepared = prepared
        self.head = easy.headParser
        head.reset(maximumBytes: engine.configuration.maximumResponseHeaderBytes)
        // The wake closure (two weak references) only for a request that has a body.
        self.bodyReader = prepared.body.isEmpty
            ? nil : try BodyReader(prepared.body, wake: Self.bodyWake(task: task, engine: engine))
        if let options = task.options.download {
            let resume = options.resume
            download = try DownloadFile(url: options.fileURL, resumingAt: resume?.bytesReceived ?? 0, resume: resume)
        } else {
            download = nil
        }
        // One read of the hooks per transfer (a snapshot taken under the engine's lock).
        let hooks = engine.hooks
        let isDataTask = task is DataTask
        // The one place that decides whether body chunks go to user code; the completion
        // follows the decision (`TransferOutcome.bodyWentToUserCode`).
        self.dataReceivedHook = isDataTask ? hooks.dataReceived : nil
        self.deliversBody = task.streamsBody || dataReceivedHook != nil
        self.responseStream = task.options.responseStream
        self.streamCredit = responseStream?.credit ?? (deliversBody ? StreamCredit() : nil)
        // A streamed response is the consumer's to judge as it reads (it may stop at once):
        // the manager's response hook, which could turn it into a download, is not asked.
        self.asksResponseHook = isDataTask && hooks.dataTaskDidReceiveResponse != nil && responseStream == nil
        let limit = engine.configuration.maximumCollectedBodyBytes
        self.collectedBodyLimit = task.options.collectsBody && limit > 0 ? Int64(limit) : 0
        self.state = TransferStateMachine(
            // The task's first prepared request is its original request's (`makeTask`).
            timeouts: TransferTimeouts(
                requested: prepared.timeoutInterval,
                timeoutIntervalForRequest: engine.configuration.timeoutIntervalForRequest,
                timeoutIntervalForResource: engine.configuration.timeoutIntervalForResource),
            maximumRedirects: engine.configuration.maximumRedirects,
            now: startUptime, totalStart: prepared.adaptationStart,
            firstProbeDelay: CurlRuntime.strandsBufferedStreamInput ? DriverLoop.firstProbeDelay : nil)
    }

    /// Resumes a transfer whose body read paused for data (called on a body pump's queue).
    /// Weak: a caller's stream stuck in a read must not keep the task or the manager alive.
    static func bodyWake(task: SessionTask, engine: SessionEngine) -> @Sendable () -> Void {
        { [weak task, weak engine] in
            guard let task, let engine else { return }
            _ = engine.submit(.resumeSending(task))
        }
    }

    /// Now, on the clock the timeouts use.
    static var uptime: UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The driver loop's reading of `uptime`, taken once per pass of the loop (after
    /// `curl_multi_poll` returns): curl's callbacks mark activity with it instead of reading
    /// the system clock for every header line and body chunk. An activity mark is then early
    /// by at most the time one pass takes, against idle timeouts of seconds.
    /// Confinement: the driver thread.
    final class PassClock {
        var now: UInt64 = TaskDelegate.uptime
        /// The earliest deadline a callback started during this pass (an idle clock that began
        /// to run when the transfer got its connection), for the loop's next timeout check;
        /// `.max`: none.
        var startedDeadline: UInt64 = .max

        /// Transfers whose server answered while their body's producer was behind, for the
        /// loop to lift their send pause after this pass (`DriverLoop.liftSendPauses`).
        var answeredWhileSendPaused: [TaskDelegate] = []
        /// The loop's passes so far (wrapping), counted at the start of each.
        private(set) var pass: UInt64 = 0
        /// The last pass after which the loop lifted a send pause (`liftSendPauses`).
        private(set) var lastLiftPass: UInt64 = .max
        /// How many passes in a row, up to the one before this, lifted a send pause.
        private(set) var liftsInARow = 0
        /// How long a deferred lift waits for a pass of its own (`deferLift`).
        static let deferredLiftDelay: UInt64 = 5_000_000

        /// Notes that the loop lifted send pauses after this pass.
        func noteLift() {
            guard lastLiftPass != pass else { return }
            liftsInARow = lastLiftPass == pass &- 1 ? liftsInARow + 1 : 1
            lastLiftPass = pass
        }

        /// Counts this pass: a pass that lifted nothing ends a run of lifts.
        func beginPass() {
            pass &+= 1
            if lastLiftPass != pass &- 1 { liftsInARow = 0 }
        }

        /// A lift skipped to keep the loop from lifting in every pass: the loop comes back within
        /// `deferredLiftDelay`, after passes without lifts, and the lift is made then.
        func deferLift() {
            noteStarted(now &+ Self.deferredLiftDelay)
        }

        /// Makes sure the loop checks the timeouts by `deadline`.
        func noteStarted(_ deadline: UInt64?) {
            if let deadline, deadline < startedDeadline { startedDeadline = deadline }
        }
    }

    // MARK: - Redirects

    /// Where the next hop's body comes from.
    enum NextBody {
        /// The task's own body again, from its start (a 307/308: data, file or stream).
        case same
        /// The body the next request carries (the redirection hook set one), or none.
        case fromRequest
    }

    /// Prepares the delegate for the next request of a redirect chain.
    ///
    /// The body is the delegate's, not the `URLRequest`'s: a file upload's body never was in
    /// the request, so re-deriving it from the request would send an empty body.
    func restart(with next: URLRequest, prepared nextPrepared: PreparedRequest, body: NextBody) throws(SessionError) {
        switch body {
        case .same:
            if let reader = bodyReader {
                guard reader.rewind() else {
                    throw reader.rewindFailure
                        ?? .bodyStreamFailed("the redirect needs the request body again, but its stream cannot be replayed")
                }
            }
        case .fromRequest:
            // The hop's request may carry the very stream the last one read (a redirection
            // hook that keeps a 303's POST with the original request's body): a second reader
            // over it read what was left beside the first one's pump, and the server took the
            // tail (or nothing) for the body. It goes again only when it can start over.
            if case .stream(let stream, _) = nextPrepared.body, let reader = bodyReader, reader.reads(stream) {
                guard reader.rewind() else {
                    throw reader.rewindFailure
                        ?? .bodyStreamFailed("the redirect's request carries the body stream the first request read, which can be read only once")
                }
                break
            }
            // A body that stays behind (a 303's GET) stops its producer now, not at the end.
            bodyReader?.stopProducing()
            bodyReader = try BodyReader(nextPrepared.body, wake: Self.bodyWake(task: task, engine: engine))
        }
        request = next
        redirectHop = next
        prepared = nextPrepared
        resetResponseState()
        state.redirectFollowed(now: Self.uptime)
        task.didRedirect(to: next)
    }

    /// Sends `next` from the next attempt on (a retry's adapted request); the body stays the
    /// delegate's own.
    func adopt(_ next: URLRequest, prepared nextPrepared: PreparedRequest) {
        request = next
        prepared = nextPrepared.with(body: prepared.body)
        task.didRedirect(to: next)
    }

    /// Forgets the last response before the delegate sends another request.
    func resetResponseState() {
        if bodyReader != nil { task.beginSendAttempt() }
        head.reset()
        responseHead = nil
        body.reset()
        bodyBytesDelivered = 0
        decodedBodyBytes = 0
        lastWritePaused = false
        lastUploadedCount = 0
        lastDownloadedCount = 0
        isContentEncoded = false
        refusedExpectation = false
        answeredWhole = false
        answeredWholeWaits = false
        heldBodyWasCut = false
    }

    /// Prepares the delegate to send the same request again (after a challenge, or on a
    /// fresh connection). False when the body cannot be sent twice.
    func prepareToRetry() -> Bool {
        if let reader = bodyReader {
            guard reader.isRewindable, reader.rewind() else { return false }
        }
        continueDownloadOnRetry()  // reads the attempt's response: before it is forgotten
        if let download, !(task is DownloadTask) {
            // A data task's body the response hook sent to a file (`.becomeDownload`) belongs
            // to that attempt's answer: the next answer is the hook's to place again. Kept,
            // the file was left behind, or took the next body the hook wanted in memory.
            download.finish(keep: false)
            self.download = nil
        }
        resetResponseState()
        state.restart(now: Self.uptime)
        securityState.isWithheldForChallenge = false
        failure = nil
        return true
    }

    var canReplayBody: Bool { bodyReader?.isRewindable ?? true }

    /// The longest body of a refused resume answer that is read and dropped (keeping the
    /// connection) rather than cut at its head.
    static let droppedBodyLimit: Int64 = 64 * 1024

    /// The upload and download counts of curl's last progress call (activity marks).
    var lastUploadedCount: Int64 = 0
    var lastDownloadedCount: Int64 = 0
    /// In `PassClock.answeredWhileSendPaused` for the current pass.
    var sendPauseLiftQueued = false
    /// The pass after which the loop last lifted this transfer's send pause
    /// (`PassClock.pass`; `.max`: never).
    var sendPauseLiftPass: UInt64 = .max
}
