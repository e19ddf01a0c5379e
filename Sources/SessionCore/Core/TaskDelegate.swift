internal import CCurl
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
    private(set) var request: URLRequest
    private(set) var prepared: PreparedRequest
    private var bodyReader: BodyReader?
    /// A download task's file (nil for data tasks, unless the response hook turned the data
    /// task into a download): the delivered body goes there.
    private(set) var download: DownloadFile?
    /// The handle's parser, reset for this transfer (its buffers outlive the transfer).
    private let head: ResponseHeadParser
    /// The current exchange's response head, once complete (Foundation's `HTTPURLResponse`
    /// is built from it only when someone asks, off this thread).
    private(set) var responseHead: HTTPResponseHead?
    /// The body collected for the completion handler (only when one wants it).
    @exclusivity(unchecked) private(set) var body = ResponseBody()  // driver thread only, see DriverLoop.delegates
    /// Set by a callback that aborted the transfer for a reason of Curlew's own; it wins over
    /// the `CURLcode` that follows the abort.
    private(set) var failure: SessionError?
    @exclusivity(unchecked) private(set) var transactions: [TransactionMetrics] = []
    private(set) var redirectCount = 0
    let startDate = Date()
    let startUptime = DispatchTime.now().uptimeNanoseconds
    private var bodyBytesDelivered: Int64 = 0
    /// Decoded body bytes of this exchange, delivered or held back (the bomb guard counts
    /// every body, a redirect's and a held-back 401's too).
    private var decodedBodyBytes: Int64 = 0
    private(set) var isContentEncoded = false
    /// How the current response is treated, decided when its head arrived (nil before):
    /// a redirect or challenged 401 is held back from the task, its body kept aside.
    private(set) var headDisposition: TransferEnd.HeadDisposition?
    /// The idle and total timeouts, enforced by the driver loop.
    var clock: TransferClock
    /// The driver loop's time for this pass: curl's callbacks mark activity with it.
    let passClock: PassClock
    /// The retained reference handed to curl; released by the driver after removal.
    var unmanagedSelf: UnsafeMutableRawPointer?
    /// Whether the easy handle is currently in the multi handle.
    var isAttached = false
    /// The origin whose connection slot this transfer holds or waits for (`HostAdmission`);
    /// nil when it is not counted (multiplexed, or no per-host limit).
    var admissionOrigin: HostAdmission.Origin?
    /// In line for a slot: not attached yet.
    var isWaitingForSlot = false
    /// Whether the response hook is asked about this transfer's delivered response (a data
    /// task, with the hook set when the transfer started).
    private let asksResponseHook: Bool
    /// The response hook has not answered yet: body chunks wait in curl (the write callback
    /// pauses), and an exchange that ends meanwhile waits in `pendingEndFacts`.
    var awaitsResponseDecision = false
    var pendingEndFacts: TransferEnd.Facts?
    /// Retries made so far, and the outcome's error kept while the retrier decides or the
    /// retry waits for its time.
    var retryCount = 0
    var awaitsRetryDecision = false
    var pendingFinishError: SessionError?
    /// Whether body bytes already went to user code (such an attempt cannot be retried).
    var hasStreamedBody: Bool { deliversBody && bodyBytesDelivered > 0 }
    /// Whether body chunks go to user code (a data handler, or the data-received hook as it
    /// was when the transfer started): asked once, not under the engine's lock per chunk.
    private let deliversBody: Bool
    /// Streaming: bytes handed to user code and not yet consumed (backpressure); nil when
    /// no chunk goes to user code.
    private let streamCredit: StreamCredit?
    /// Paused by the caller's `suspend()`, as opposed to by backpressure.
    var isSuspendedByCaller = false
    /// Set once a redirect crossed origins: credentials from the configuration stay behind.
    var hasCrossedOrigin = false
    /// How the current exchange uses the cookie jar, decided when it was configured
    /// (`joinShare`); `.none` without a jar.
    var exchangeCookieUse: CookieUse = .none
    /// TLS enforcement and challenge state (Features/Security: `TransferSecurityState`,
    /// `TaskDelegate+Security.swift`).
    @exclusivity(unchecked) var securityState = TransferSecurityState()

    init(
        task: SessionTask, easy: EasyHandle, engine: SessionEngine, prepared: PreparedRequest,
        passClock: PassClock
    ) throws(SessionError) {
        self.task = task
        self.easy = easy
        self.engine = engine
        self.passClock = passClock
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
        self.deliversBody = task.streamsBody || (isDataTask && hooks.dataReceived != nil)
        self.streamCredit = deliversBody ? StreamCredit() : nil
        self.asksResponseHook = isDataTask && hooks.dataTaskDidReceiveResponse != nil
        self.clock = TransferClock(
            // The task's first prepared request is its original request's (`makeTask`).
            timeouts: TransferTimeouts(
                requested: prepared.timeoutInterval,
                timeoutIntervalForRequest: engine.configuration.timeoutIntervalForRequest,
                timeoutIntervalForResource: engine.configuration.timeoutIntervalForResource),
            now: startUptime)
    }

    /// Resumes a transfer whose body read paused for data (called on a body pump's queue).
    /// Weak: a caller's stream stuck in a read must not keep the task or the manager alive.
    private static func bodyWake(task: SessionTask, engine: SessionEngine) -> @Sendable () -> Void {
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

        /// Makes sure the loop checks the timeouts by `deadline`.
        func noteStarted(_ deadline: UInt64?) {
            if let deadline, deadline < startedDeadline { startedDeadline = deadline }
        }
    }

    // MARK: - Configuring the easy handle

    /// Sets every option of the next request on the easy handle: freshly reset, or reused as
    /// it was when its last transfer set only options this sets again (`EasyHandle.needsReset`).
    func configure(share: UnsafeMutableRawPointer) -> SessionError? {
        let url = prepared.url
        // Parsed on the caller's thread (`CurlURL`): curl copies the parsed handle instead of
        // parsing the string again; the handle keeps it while curl may read it.
        var ok = easy.setURL(prepared.urlString, parsed: prepared.curlURL)
        if !easy.hasBaseOptions {
            // The same for every transfer: kept by a handle reused without a reset.
            ok = ok && easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
            easy.set(CURLOPT_NOSIGNAL, 1)
            _ = curlew_easy_setopt_write_function(easy.raw, CURLOPT_HEADERFUNCTION, CurlCallbacks.header)
            _ = curlew_easy_setopt_write_function(easy.raw, CURLOPT_WRITEFUNCTION, CurlCallbacks.write)
            // Always install the read callback: without one, curl reads request bodies from stdin.
            _ = curlew_easy_setopt_read_function(easy.raw, CurlCallbacks.read)
            _ = curlew_easy_setopt_seek_function(easy.raw, CurlCallbacks.seek)
            easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
            easy.set(CURLOPT_TCP_KEEPALIVE, 1)
            // The callbacks' user data: the handle's slot, which names the running transfer.
            let slot = UnsafeMutableRawPointer(easy.transferSlot)
            easy.set(CURLOPT_PRIVATE, pointer: slot)
            easy.set(CURLOPT_HEADERDATA, pointer: slot)
            easy.set(CURLOPT_WRITEDATA, pointer: slot)
            easy.set(CURLOPT_READDATA, pointer: slot)
            easy.set(CURLOPT_SEEKDATA, pointer: slot)
            // When the transfer gets a connection: its idle clock starts then, and TLS
            // admission runs in the prerequest callback.
            _ = curlew_easy_setopt_resolver_start_function(easy.raw, CurlCallbacks.resolverStarted)
            easy.set(CURLOPT_RESOLVER_START_DATA, pointer: slot)
            _ = curlew_easy_setopt_sockopt_function(easy.raw, CurlCallbacks.socketOpened)
            easy.set(CURLOPT_SOCKOPTDATA, pointer: slot)
            _ = curlew_easy_setopt_prereq_function(easy.raw, CurlCallbacks.prerequest)
            easy.set(CURLOPT_PREREQDATA, pointer: slot)
            // The manager's HTTP version, proxy and socket: the same for every transfer of its
            // handles (two string options fewer per request on a reused handle).
            switch engine.configuration.httpVersion {
            case .http1_1: easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
            case .http2: easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            case .http2PriorKnowledge: easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE))
            }
            switch engine.configuration.proxy {
            case .environment where !engine.environmentNamesProxy:
                // No proxy variable was set when the manager was made: "no proxy" said outright,
                // and an explicit `NOPROXY`, spare libcurl its five `getenv` scans per request.
                easy.set(CURLOPT_PROXY, "")
                easy.set(CURLOPT_NOPROXY, "")
            case .environment:
                if let bypass = engine.proxyBypass { easy.set(CURLOPT_NOPROXY, bypass) }
                configureProxyCredential()
            case .none: easy.set(CURLOPT_PROXY, "")
            case .url(let proxy):
                easy.set(CURLOPT_PROXY, proxy)
                if proxy.lowercased().hasPrefix("https:") {
                    // The proxy's own certificate: the system's authorities and the configured file.
                    easy.set(CURLOPT_PROXY_CAINFO, engine.configuration.certificateAuthorityFile ?? CurlRuntime.systemCABundle)
                }
                // Only the configured bypass list: an empty one overrides a `no_proxy` in the
                // environment, which libcurl would otherwise apply to an explicit proxy too.
                easy.set(CURLOPT_NOPROXY, engine.proxyBypass ?? "")
                configureProxyCredential()
            }
            if let path = engine.configuration.unixSocketPath { easy.set(CURLOPT_UNIX_SOCKET_PATH, path) }
            easy.hasBaseOptions = ok
        }
        easy.transferSlot.pointee = unmanagedSelf
        if bodyReader != nil {
            // Upload counters (and the idle clock of a body the server stops reading) come
            // from curl's progress callback; a request without a body needs none: curl would
            // call it on every pass of the loop for nothing.
            easy.noteTransferSpecificOption()
            _ = curlew_easy_setopt_xferinfo_function(easy.raw, CurlCallbacks.progress)
            easy.set(CURLOPT_XFERINFODATA, pointer: UnsafeMutableRawPointer(easy.transferSlot))
            easy.set(CURLOPT_NOPROGRESS, 0)
        }
        joinShare(share)  // and libcurl's cookie engine on or off (Features/Cookies)

        // PIPEWAIT makes a transfer wait for a connection whose multiplexing is not known
        // yet rather than open another. Only where multiplexing can happen: on a cleartext
        // http:// URL under `.http2` (HTTP/1.1 only), it made parallel requests to one host
        // queue behind each other's response heads.
        if PreparedRequest.canMultiplex(prepared.urlOrigin, version: engine.configuration.httpVersion) {
            easy.set(CURLOPT_PIPEWAIT, 1)
            // The task's priority as its HTTP/2 stream weight, 1...256 (weights only matter
            // relative to the other streams of the connection: the default 0.5 gives 129).
            easy.set(CURLOPT_STREAM_WEIGHT, 1 + Int((Double(task.priority) * 255).rounded()))
        }
        if let download, download.asksForRange {
            // A range of a content-coded representation would be a range of other bytes:
            // the resumed part is asked for as is.
            easy.setAcceptEncoding(nil)
        } else {
            easy.setAcceptEncoding(prepared.acceptEncoding)
        }

        var headerLines = download?.headerLines(adding: prepared.headerLines) ?? prepared.headerLines
        // curl adds "Expect: 100-continue" to bodies over 1 MiB and then waits up to a second
        // for an answer many servers never send. URLSession never sends it; neither does Curlew
        // unless the caller asks. Only a body makes curl add it: without one the list stays
        // shorter (curl walks it for every header it might write).
        if bodyReader != nil && !prepared.hasExpectHeader { headerLines.append("Expect:") }
        guard easy.setHeaders(headerLines) else { return .curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "out of memory") }

        configureMethodAndBody()
        // Timeouts are the driver's (`TransferClock`), not curl's low-speed check: curl's
        // averages over a window and fired seconds after the last byte moved.
        if let error = configureTLS() { return error }

        let multiplexes = PreparedRequest.canMultiplex(prepared.urlOrigin, version: engine.configuration.httpVersion)
        let bufferSize = engine.configuration.receiveBufferSize
            ?? (multiplexes ? task.options.multiplexedReceiveBufferSize : nil) ?? task.options.defaultReceiveBufferSize
        // Never below libcurl's default 16 KiB: libcurl 7.88 keeps a transfer's buffer when the
        // transfer ends on an HTTP/2 connection still in use, `curl_easy_reset` sets the size
        // back to 16 KiB, and a new size is refused while the old buffer exists. A smaller
        // buffer kept that way would then be read into as if it held 16 KiB.
        easy.set(CURLOPT_BUFFERSIZE, max(16 << 10, min(bufferSize, 10 << 20)))
        return ok ? nil : .badURL("libcurl rejected '\(url.absoluteString)'")
    }

    private func configureProxyCredential() {
        guard let credential = engine.configuration.proxyCredential, let user = credential.user else { return }
        easy.set(CURLOPT_PROXYUSERNAME, user)
        easy.set(CURLOPT_PROXYPASSWORD, credential.password ?? "")
        // Basic, sent with the first request: asking the proxy which scheme it wants would cost
        // a 407 round trip per request (curl forgets the answer when the handle is reset).
        easy.set(CURLOPT_PROXYAUTH, HTTPAuthenticationScheme.basic.curlAuthBit)
    }

    private func configureMethodAndBody() {
        let method = prepared.method
        if method == "HEAD" {
            easy.set(CURLOPT_NOBODY, 1)
        } else if bodyReader == nil && method == "GET" {
            easy.set(CURLOPT_HTTPGET, 1)
        } else if bodyReader == nil && method != "POST" && method != "PUT" && method != "PATCH" {
            easy.set(CURLOPT_CUSTOMREQUEST, method)  // DELETE, OPTIONS, ... without a body
        } else {
            // Any method with a body (or POST/PUT/PATCH with an empty one): POST mechanics
            // with the caller's method name; the read callback supplies the bytes.
            easy.set(CURLOPT_POST, 1)
            easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: bodyReader.map { $0.length ?? -1 } ?? 0)
            if method != "POST" { easy.set(CURLOPT_CUSTOMREQUEST, method) }
        }
    }

    private func configureTLS() -> SessionError? {
        // Each hop is configured afresh, so an http:// hop needs no TLS options (a redirect
        // to https:// sets them when it is configured).
        guard prepared.urlOrigin.isHTTPS else { return configureSecurity() }
        // Name the CA *file* and clear the CA *path*: only then does libcurl cache the parsed
        // store between handshakes (17 ms → 0.4 ms of CPU per new TLS connection here).
        easy.set(CURLOPT_CAINFO, engine.configuration.certificateAuthorityFile ?? CurlRuntime.systemCABundle)
        easy.set(CURLOPT_CAPATH, nil as String?)
        switch engine.configuration.tlsMinimumVersion {
        case .tls1_2: easy.set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        case .tls1_3: easy.set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_3))
        }
        return configureSecurity()
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
                    throw .bodyStreamFailed("the redirect needs the request body again, but its stream cannot be replayed")
                }
            }
        case .fromRequest:
            bodyReader = try BodyReader(nextPrepared.body, wake: Self.bodyWake(task: task, engine: engine))
        }
        request = next
        prepared = nextPrepared
        resetResponseState()
        redirectCount += 1
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
    private func resetResponseState() {
        head.reset()
        responseHead = nil
        awaitsResponseDecision = false
        pendingEndFacts = nil
        body.reset()
        bodyBytesDelivered = 0
        decodedBodyBytes = 0
        lastUploadedCount = 0
        lastDownloadedCount = 0
        isContentEncoded = false
        headDisposition = nil
    }

    /// Prepares the delegate to send the same request again (after a challenge, or on a
    /// fresh connection). False when the body cannot be sent twice.
    func prepareToRetry() -> Bool {
        if let reader = bodyReader {
            guard reader.isRewindable, reader.rewind() else { return false }
        }
        resetResponseState()
        securityState.isWithheldForChallenge = false
        failure = nil
        return true
    }

    var canReplayBody: Bool { bodyReader?.isRewindable ?? true }

    // MARK: - Callbacks (driver thread, inside curl_multi_perform)

    /// libcurl resolves or connects for this transfer: it has left the wait for a connection.
    func isConnecting() {
        guard clock.holds.contains(.noConnection) else { return }
        clock.release(.noConnection, at: passClock.now)
        passClock.noteStarted(clock.nextDeadline)
    }

    /// libcurl picked the connection (new or reused) and is about to send the request.
    /// False refuses it (TLS admission: a connection not verified under the current policy).
    func connectionIsReady() -> Bool {
        isConnecting()
        guard let context = securityState.tlsAdmission else { return true }
        return context.admitRequest()
    }

    func didReceiveHeaderLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
        clock.noteActivity(at: passClock.now)
        switch head.consume(bytes) {
        case .needMore:
            return true
        case .tooLarge:
            failure = .responseHeadersTooLarge(limit: head.maximumBytes)
            return false
        case .invalid(let reason):
            failure = .badServerResponse(reason)
            return false
        case .nextResponse:
            // curl answered the last head itself (an authentication pass) and ignored its
            // body: that head was never the task's, and nothing of it reached the task's body.
            if headDisposition == .deliver && awaitsResponseDecision {
                failure = .badServerResponse("a second response arrived while the response hook was deciding on the first")
                return false
            }
            responseHead = nil
            headDisposition = nil
            securityState.isWithheldForChallenge = false
            body.reset()
            isContentEncoded = false
            decodedBodyBytes = 0
            bodyBytesDelivered = 0
            download?.forgetPlan()
            return true
        case .headComplete:
            let response = head.makeHead(url: prepared.url)
            responseHead = response
            storeCookies(from: response)
            isContentEncoded = head.hasContentCoding
                ?? (response.value(forHTTPHeaderField: "Content-Encoding").map { $0.lowercased() != "identity" } ?? false)
            let hop = RedirectPolicy.nextHop(from: request, response: response)
            let disposition = TransferEnd.disposition(
                hop: hop, challengeable: hop == nil && withholdsForChallenge(response))
            headDisposition = disposition
            let expected = head.expectedContentLength ?? response.expectedContentLength
            if disposition == .deliver {
                if let download {
                    planDownload(download, for: response)
                    if download.needsFullRestart { return true }  // this answer is not the task's
                }
                task.didReceive(head: response, announced: expected, offset: download?.plannedOffset ?? 0)
                if let hub = engine.monitorHub { hub.emit(.received(task, response)) }
                if asksResponseHook { askResponseHook(response) }
                if task.options.collectsBody { body.expect(expected) }
            }
            return true
        }
    }

    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> WriteDecision {
        // libcurl resets pause bits when a transfer starts, so a suspend() that came before
        // (or while detached for a redirect or challenge) takes effect here, from the callback.
        if isSuspendedByCaller { return .pause }
        if awaitsResponseDecision && headDisposition == .deliver {
            // The hook's time is not the server's silence.
            clock.hold(.decision)
            return .pause
        }
        clock.noteActivity(at: passClock.now)
        decodedBodyBytes += Int64(bytes.count)
        if isContentEncoded {
            // Compression-bomb guard, over every body (held back or not): curl counts the
            // received (encoded) bytes in SIZE_DOWNLOAD.
            let configuration = engine.configuration
            let encoded = max(1, easy.info(offset: CURLINFO_SIZE_DOWNLOAD_T) ?? 1)
            if decodedBodyBytes > Int64(configuration.decompressionAllowance),
                decodedBodyBytes / encoded > Int64(configuration.decompressionLimit)
            {
                failure = .decompressionLimitExceeded(ratio: configuration.decompressionLimit)
                return .abort
            }
        }
        if headDisposition != .deliver {
            // A redirect's body is kept (small, capped) only in case the hook refuses it.
            if body.count < 1 << 20 { _ = body.append(bytes) }  // capped: stays a small Data
            return .accepted
        }
        if let streamCredit {
            if streamCredit.shouldPause() {
                // The consumer fell behind: not the server's silence, so not idle time.
                clock.hold(.backpressure)
                return .pause
            }
            let chunk = Data(bytes)
            streamCredit.add(chunk.count)
            engine.deliver(chunk, for: task, credit: streamCredit)
        }
        if let download {
            if download.dropsBody { return .accepted }  // dropped: sent again, or the task fails
            if let error = download.write(bytes) {
                failure = error
                return .abort
            }
            bodyBytesDelivered += Int64(bytes.count)
            task.didReceiveBodyBytes(download.position)
            return .accepted
        }
        if task.options.collectsBody, !body.append(bytes) {
            failure = .curl(
                code: Int(CURLE_OUT_OF_MEMORY.rawValue),
                message: "the response body outgrew the memory the system would map for it (\(body.count) bytes kept)")
            return .abort
        }
        bodyBytesDelivered += Int64(bytes.count)
        task.didReceiveBodyBytes(bodyBytesDelivered)
        return .accepted
    }

    /// Plans where `response`'s body goes in the download's file (nothing is cut yet).
    func planDownload(_ download: DownloadFile, for response: HTTPResponseHead) {
        download.plan(
            statusCode: response.statusCode, contentRange: response.value(forHTTPHeaderField: "Content-Range"),
            entityTag: response.value(forHTTPHeaderField: "ETag"), isContentEncoded: isContentEncoded)
    }

    /// Sends the body of the delivered response to a new temporary file from now on (the
    /// response hook answered `.becomeDownload`; no body byte was taken yet).
    func becomeDownload() -> SessionError? {
        let url = DownloadOptions.newFileURL(for: engine.configuration)
        do {
            let file = try DownloadFile(url: url)
            download = file
            return nil
        } catch {
            return error
        }
    }

    /// Puts the delivered response to the data task's response hook on the operation queue
    /// (Foundation's response is built there); the answer comes back as a driver command.
    private func askResponseHook(_ head: HTTPResponseHead) {
        guard let hook = engine.hooks.dataTaskDidReceiveResponse, let dataTask = task as? DataTask else { return }
        awaitsResponseDecision = true
        let engine = self.engine
        engine.operationQueue.async {
            let disposition = head.httpURLResponse.map { hook(dataTask, $0) } ?? .allow
            engine.submit(.responseDecision(dataTask, disposition))
        }
    }

    /// What the read callback gives curl: bytes, a pause until the body's stream has data
    /// (the idle clock keeps running: a stream that never delivers times out), or a failure.
    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> BodyReader.ReadOutcome {
        guard let reader = bodyReader else { return .bytes(0) }
        let outcome = reader.read(into: buffer)
        switch outcome {
        case .bytes(let count) where count > 0: clock.noteActivity(at: passClock.now)
        case .failed(let error): failure = error
        default: break
        }
        return outcome
    }

    func rewindBody() -> Bool { bodyReader?.rewind() ?? true }

    func didProgress(uploaded: Int64, uploadTotal: Int64, downloaded: Int64, downloadTotal: Int64) {
        // Bytes curl handed to the socket: an upload the server stopped reading stops here.
        if uploaded != lastUploadedCount || downloaded != lastDownloadedCount {
            lastUploadedCount = uploaded
            lastDownloadedCount = downloaded
            clock.noteActivity(at: passClock.now)
        }
        task.didSend(bytes: uploaded, expected: bodyReader?.length ?? uploadTotal)
    }

    private var lastUploadedCount: Int64 = 0
    private var lastDownloadedCount: Int64 = 0

    // MARK: - Completion

    /// Records this exchange's metrics from curl; call once per request, before reset.
    func collectMetrics() {
        let newConnections = easy.info(long: CURLINFO_NUM_CONNECTS) ?? 1
        if newConnections > 0 {
            // libcurl counts its own retries on a connection that died under a request in
            // the handle (`state.retrycount`, up to 5), and only `curl_easy_reset` clears the
            // count: a handle reused without one would fail the 6th such retry of its life. A
            // retry always opens a connection, so a transfer that opened one resets the handle.
            easy.noteTransferSpecificOption()
        }
        // The status and protocol of the exchange's last response, as its status line said
        // (libcurl writes "HTTP/2 200" for HTTP/2 too): what `CURLINFO_RESPONSE_CODE` and
        // `CURLINFO_HTTP_VERSION` would answer, without asking.
        let version: String? = head.statusCode == 0 ? nil : head.httpVersion
        let transaction = TransactionMetrics(
                url: prepared.url,
                statusCode: head.statusCode,
                // No lookup, connect or handshake on a reused connection: 0, as documented,
                // without asking curl.
                domainLookupDuration: newConnections == 0 ? 0 : easy.seconds(CURLINFO_NAMELOOKUP_TIME_T),
                connectDuration: newConnections == 0 ? 0 : easy.seconds(CURLINFO_CONNECT_TIME_T),
                secureConnectionDuration: newConnections == 0 ? 0 : easy.seconds(CURLINFO_APPCONNECT_TIME_T),
                timeToFirstByte: easy.seconds(CURLINFO_STARTTRANSFER_TIME_T),
                totalDuration: easy.seconds(CURLINFO_TOTAL_TIME_T),
                isReusedConnection: newConnections == 0,
                httpVersion: version,
                remoteAddress: easy.address(CURLINFO_PRIMARY_IP),
                remotePort: easy.info(long: CURLINFO_PRIMARY_PORT).flatMap { $0 == 0 ? nil : $0 },
                localAddress: easy.address(CURLINFO_LOCAL_IP),
                localPort: easy.info(long: CURLINFO_LOCAL_PORT).flatMap { $0 == 0 ? nil : $0 },
                requestBytesSent: Int64(easy.info(long: CURLINFO_REQUEST_SIZE) ?? 0)
                    + (bodyReader == nil ? 0 : easy.info(offset: CURLINFO_SIZE_UPLOAD_T) ?? 0),
                responseBodyBytesReceived: easy.info(offset: CURLINFO_SIZE_DOWNLOAD_T) ?? 0,
                responseHeaderBytesReceived: Int64(easy.info(long: CURLINFO_HEADER_SIZE) ?? 0))
        // The usual single exchange as a literal: growing an empty array costs more.
        if transactions.isEmpty { transactions = [transaction] } else { transactions.append(transaction) }
    }

    var metrics: TaskMetrics {
        TaskMetrics(
            transactionMetrics: transactions, taskStart: startDate,
            taskDuration: Double(DispatchTime.now().uptimeNanoseconds - startUptime) / 1e9,
            redirectCount: redirectCount)
    }

    /// The error for a finished transfer: Curlew's own reason first, then curl's code.
    func error(for code: CURLcode) -> SessionError? {
        if let failure { return failure }
        if let trustFailure = securityError(for: code) { return trustFailure }
        if code == CURLE_OK {
            return responseHead == nil ? .badServerResponse("the transfer ended without a response") : nil
        }
        return SessionError(curlCode: code, message: easy.errorMessage)
    }

    /// Takes the collected body out (no copy).
    func takeBody() -> Data? {
        guard task.options.collectsBody, download == nil else { return nil }
        return body.take()
    }
}

/// Backpressure for streamed bodies: the driver pauses the transfer while more than
/// `limit` bytes wait in user code, and the consumer resumes it once they drain.
final class StreamCredit: Sendable {
    private struct State { var outstanding = 0; var paused = false }
    // Shared by the driver (add, shouldPause) and the operation queue (consume): the Mutex
    // makes that safe.
    private let state = Mutex(State())
    let limit = 4 << 20

    func add(_ count: Int) { state.withLock { $0.outstanding += count } }

    /// True when the writer must pause; remembers that it did.
    func shouldPause() -> Bool {
        state.withLock { state in
            if state.outstanding >= limit { state.paused = true }
            return state.paused
        }
    }

    /// Records consumed bytes; true when a paused transfer should resume now.
    func consume(_ count: Int) -> Bool {
        state.withLock { state in
            state.outstanding -= count
            if state.paused && state.outstanding <= limit / 2 {
                state.paused = false
                return true
            }
            return false
        }
    }
}
