internal import CCurl
import Foundation
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
    private var head: ResponseHeadParser
    private(set) var response: HTTPURLResponse?
    /// The body collected for the completion handler (only when one wants it).
    private(set) var body = Data()
    /// Set by a callback that aborted the transfer for a reason of Curlew's own; it wins over
    /// the `CURLcode` that follows the abort.
    private(set) var failure: SessionError?
    private(set) var transactions: [TransactionMetrics] = []
    private(set) var redirectCount = 0
    let startDate = Date()
    let startUptime = DispatchTime.now().uptimeNanoseconds
    private var bodyBytesDelivered: Int64 = 0
    private var isContentEncoded = false
    /// Whether this response is a redirect Curlew will follow: its body is not streamed out.
    private var isRedirectCandidate = false
    /// The retained reference handed to curl; released by the driver after removal.
    var unmanagedSelf: UnsafeMutableRawPointer?
    /// Whether the easy handle is currently in the multi handle.
    var isAttached = false
    /// Streaming: bytes handed to user code and not yet consumed (backpressure).
    let streamCredit = StreamCredit()
    /// Paused by the caller's `suspend()`, as opposed to by backpressure.
    var isSuspendedByCaller = false
    /// Set once a redirect crossed origins: credentials from the configuration stay behind.
    var hasCrossedOrigin = false
    // Security state (Features/Security/TaskDelegate+Security.swift).
    /// The TLS enforcement context handed to curl's and OpenSSL's callbacks (https only).
    var tlsContext: TLSHandshakeContext?
    /// Challenges put to the handler so far (bounded by `maximumChallengeAttempts`).
    var challengeAttempts = 0
    /// The challenge the handler is deciding.
    var pendingChallenge: PendingChallenge?
    /// Credentials a challenge handler supplied, sent to the challenge's origin only.
    var challengeCredential: ChallengeCredential?
    /// The next attempt opens a new connection with a full handshake (no reuse, no resumption).
    var requiresFreshConnection = false
    /// This 401 is held back from the task while the challenge handler decides.
    var isWithheldForChallenge = false

    init(task: SessionTask, easy: EasyHandle, engine: SessionEngine, prepared: PreparedRequest) throws(SessionError) {
        self.task = task
        self.easy = easy
        self.engine = engine
        self.request = task.currentRequest ?? URLRequest(url: prepared.url)
        self.prepared = prepared
        self.head = ResponseHeadParser(maximumBytes: engine.configuration.maximumResponseHeaderBytes)
        self.bodyReader = try BodyReader(prepared.body)
    }

    // MARK: - Configuring the easy handle

    /// Sets every option of the next request on the (freshly reset) easy handle.
    func configure(share: UnsafeMutableRawPointer) -> SessionError? {
        let configuration = engine.configuration
        let url = prepared.url
        var ok = easy.set(CURLOPT_URL, url.absoluteString)
        ok = ok && easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        easy.set(CURLOPT_NOSIGNAL, 1)
        easy.set(CURLOPT_PRIVATE, pointer: unmanagedSelf)
        _ = curlew_easy_setopt_write_function(easy.raw, CURLOPT_HEADERFUNCTION, CurlCallbacks.header)
        easy.set(CURLOPT_HEADERDATA, pointer: unmanagedSelf)
        _ = curlew_easy_setopt_write_function(easy.raw, CURLOPT_WRITEFUNCTION, CurlCallbacks.write)
        easy.set(CURLOPT_WRITEDATA, pointer: unmanagedSelf)
        // Always install the read callback: without one, curl reads request bodies from stdin.
        _ = curlew_easy_setopt_read_function(easy.raw, CurlCallbacks.read)
        easy.set(CURLOPT_READDATA, pointer: unmanagedSelf)
        _ = curlew_easy_setopt_seek_function(easy.raw, CurlCallbacks.seek)
        easy.set(CURLOPT_SEEKDATA, pointer: unmanagedSelf)
        _ = curlew_easy_setopt_xferinfo_function(easy.raw, CurlCallbacks.progress)
        easy.set(CURLOPT_XFERINFODATA, pointer: unmanagedSelf)
        easy.set(CURLOPT_NOPROGRESS, 0)
        easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        joinShare(share)  // and libcurl's cookie engine on or off (Features/Cookies)
        easy.set(CURLOPT_TCP_KEEPALIVE, 1)
        easy.set(CURLOPT_PIPEWAIT, 1)

        switch configuration.httpVersion {
        case .http1_1: easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        case .http2: easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        case .http2PriorKnowledge: easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE))
        }
        easy.set(CURLOPT_ACCEPT_ENCODING, prepared.acceptEncoding)

        guard easy.setHeaders(prepared.headerLines) else { return .curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "out of memory") }

        configureMethodAndBody()
        configureTimeouts()
        if let error = configureTLS() { return error }

        let bufferSize = configuration.receiveBufferSize ?? task.options.defaultReceiveBufferSize
        easy.set(CURLOPT_BUFFERSIZE, max(1024, min(bufferSize, 10 << 20)))
        switch configuration.proxy {
        case .environment: break
        case .none: easy.set(CURLOPT_PROXY, "")
        case .url(let proxy): easy.set(CURLOPT_PROXY, proxy)
        }
        if let path = configuration.unixSocketPath { easy.set(CURLOPT_UNIX_SOCKET_PATH, path) }
        return ok ? nil : .badURL("libcurl rejected '\(url.absoluteString)'")
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

    private func configureTimeouts() {
        let configuration = engine.configuration
        // A request's own timeout wins when the caller changed it from URLRequest's default.
        let idle = request.timeoutInterval != 60 && request.timeoutInterval > 0
            ? request.timeoutInterval : configuration.timeoutIntervalForRequest
        if idle > 0 {
            easy.set(CURLOPT_CONNECTTIMEOUT_MS, Int((idle * 1000).rounded(.up)))
            // "Idle": under 1 byte/s in both directions for `idle` seconds (curl's granularity
            // is one second, so sub-second idle timeouts round up).
            easy.set(CURLOPT_LOW_SPEED_LIMIT, 1)
            easy.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(idle.rounded(.up))))
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - startUptime) / 1e9
        let remaining = configuration.timeoutIntervalForResource - elapsed
        if configuration.timeoutIntervalForResource > 0 {
            easy.set(CURLOPT_TIMEOUT_MS, max(1, Int((remaining * 1000).rounded(.up))))
        }
    }

    private func configureTLS() -> SessionError? {
        let configuration = engine.configuration
        // Name the CA *file* and clear the CA *path*: only then does libcurl cache the parsed
        // store between handshakes (17 ms → 0.4 ms of CPU per new TLS connection here).
        easy.set(CURLOPT_CAINFO, configuration.certificateAuthorityFile ?? CurlRuntime.systemCABundle)
        easy.set(CURLOPT_CAPATH, nil as String?)
        switch configuration.tlsMinimumVersion {
        case .tls1_2: easy.set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        case .tls1_3: easy.set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_3))
        }
        engine.tlsConfigurator?(self)
        return configureSecurity()
    }

    // MARK: - Redirects

    /// Prepares the delegate for the next request of a redirect chain.
    func restart(with next: URLRequest, prepared nextPrepared: PreparedRequest) throws(SessionError) {
        request = next
        prepared = nextPrepared
        if case .none = nextPrepared.body {
            bodyReader = nil
        } else if let reader = bodyReader, reader.isRewindable, sameBody(next) {
            _ = reader.rewind()
        } else {
            bodyReader = try BodyReader(nextPrepared.body)
        }
        resetResponseState()
        redirectCount += 1
        task.didRedirect(to: next)
    }

    /// Forgets the last response before the delegate sends another request.
    private func resetResponseState() {
        head.reset()
        response = nil
        body = Data()
        bodyBytesDelivered = 0
        isContentEncoded = false
        isRedirectCandidate = false
    }

    /// Prepares the delegate to send the same request again (after a challenge, or on a
    /// fresh connection). False when the body cannot be sent twice.
    func prepareToRetry() -> Bool {
        if let reader = bodyReader {
            guard reader.isRewindable, reader.rewind() else { return false }
        }
        resetResponseState()
        isWithheldForChallenge = false
        failure = nil
        return true
    }

    private func sameBody(_ next: URLRequest) -> Bool {
        next.httpBody == request.httpBody && next.httpBodyStream === request.httpBodyStream
    }

    var canReplayBody: Bool { bodyReader?.isRewindable ?? true }

    // MARK: - Callbacks (driver thread, inside curl_multi_perform)

    func didReceiveHeaderLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
        switch head.consume(bytes) {
        case .needMore:
            return true
        case .tooLarge:
            failure = .responseHeadersTooLarge(limit: head.maximumBytes)
            return false
        case .invalid(let reason):
            failure = .badServerResponse(reason)
            return false
        case .headComplete:
            guard let response = head.makeResponse(url: prepared.url) else {
                failure = .badServerResponse("unusable response head")
                return false
            }
            self.response = response
            storeCookies(from: head)
            let encoding = response.value(forHTTPHeaderField: "Content-Encoding")?.lowercased() ?? "identity"
            isContentEncoded = encoding != "identity"
            isRedirectCandidate = RedirectPolicy.isRedirect(response)
                && redirectCount < engine.configuration.maximumRedirects + 1
            // A 401 the challenge handler may answer is held back like a redirect.
            if !isRedirectCandidate && withholdsForChallenge(response) { isRedirectCandidate = true }
            let expected = response.expectedContentLength
            if !isRedirectCandidate {
                task.didReceive(response: response)
                if task.options.collectsBody, expected > 0 {
                    // Untrusted: reserve at most 16 MiB up front, grow past it as bytes arrive.
                    body.reserveCapacity(Int(min(expected, 16 << 20)))
                }
            }
            return true
        }
    }

    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> WriteDecision {
        // libcurl resets pause bits when a transfer starts, so a suspend() that came before
        // (or while detached for a redirect or challenge) takes effect here, from the callback.
        if isSuspendedByCaller { return .pause }
        if isContentEncoded {
            // Compression-bomb guard: curl counts received (encoded) bytes in SIZE_DOWNLOAD.
            let configuration = engine.configuration
            let decoded = bodyBytesDelivered + Int64(bytes.count)
            let encoded = max(1, easy.info(offset: CURLINFO_SIZE_DOWNLOAD_T) ?? 1)
            if decoded > Int64(configuration.decompressionAllowance),
                decoded / encoded > Int64(configuration.decompressionLimit)
            {
                failure = .decompressionLimitExceeded(ratio: configuration.decompressionLimit)
                return .abort
            }
        }
        if isRedirectCandidate {
            // A redirect's body is kept (small, capped) only in case the hook refuses it.
            if body.count < 1 << 20 { body.append(contentsOf: bytes) }
            return .accepted
        }
        if engine.wantsBodyDelivery(for: task) {
            if streamCredit.shouldPause() { return .pause }
            let chunk = Data(bytes)
            streamCredit.add(chunk.count)
            engine.deliver(chunk, for: task, credit: streamCredit)
        }
        if task.options.collectsBody { body.append(contentsOf: bytes) }
        bodyBytesDelivered += Int64(bytes.count)
        task.didReceiveBodyBytes(bodyBytesDelivered)
        return .accepted
    }

    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard let reader = bodyReader else { return 0 }
        switch reader.read(into: buffer) {
        case .success(let count): return count
        case .failure(let error):
            failure = error
            return nil
        }
    }

    func rewindBody() -> Bool { bodyReader?.rewind() ?? true }

    func didProgress(uploaded: Int64, uploadTotal: Int64, downloaded: Int64, downloadTotal: Int64) {
        task.didSend(bytes: uploaded, expected: bodyReader?.length ?? uploadTotal)
    }

    // MARK: - Completion

    /// Records this exchange's metrics from curl; call once per request, before reset.
    func collectMetrics() {
        let versionCode = easy.info(long: CURLINFO_HTTP_VERSION) ?? 0
        let version: String?
        switch versionCode {
        case Int(CURL_HTTP_VERSION_1_0): version = "HTTP/1.0"
        case Int(CURL_HTTP_VERSION_1_1): version = "HTTP/1.1"
        case Int(CURL_HTTP_VERSION_2_0): version = "HTTP/2"
        case Int(CURL_HTTP_VERSION_3): version = "HTTP/3"
        default: version = nil
        }
        transactions.append(
            TransactionMetrics(
                url: prepared.url,
                statusCode: easy.info(long: CURLINFO_RESPONSE_CODE) ?? 0,
                domainLookupDuration: easy.seconds(CURLINFO_NAMELOOKUP_TIME_T),
                connectDuration: easy.seconds(CURLINFO_CONNECT_TIME_T),
                secureConnectionDuration: easy.seconds(CURLINFO_APPCONNECT_TIME_T),
                timeToFirstByte: easy.seconds(CURLINFO_STARTTRANSFER_TIME_T),
                totalDuration: easy.seconds(CURLINFO_TOTAL_TIME_T),
                isReusedConnection: (easy.info(long: CURLINFO_NUM_CONNECTS) ?? 1) == 0,
                httpVersion: version,
                remoteAddress: easy.info(string: CURLINFO_PRIMARY_IP).flatMap { $0.isEmpty ? nil : $0 },
                remotePort: easy.info(long: CURLINFO_PRIMARY_PORT).flatMap { $0 == 0 ? nil : $0 },
                localAddress: easy.info(string: CURLINFO_LOCAL_IP).flatMap { $0.isEmpty ? nil : $0 },
                localPort: easy.info(long: CURLINFO_LOCAL_PORT).flatMap { $0 == 0 ? nil : $0 },
                requestBytesSent: Int64(easy.info(long: CURLINFO_REQUEST_SIZE) ?? 0)
                    + (easy.info(offset: CURLINFO_SIZE_UPLOAD_T) ?? 0),
                responseBodyBytesReceived: easy.info(offset: CURLINFO_SIZE_DOWNLOAD_T) ?? 0,
                responseHeaderBytesReceived: Int64(easy.info(long: CURLINFO_HEADER_SIZE) ?? 0)))
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
            return response == nil ? .badServerResponse("the transfer ended without a response") : nil
        }
        return SessionError(curlCode: code, message: easy.errorMessage)
    }

    /// Takes the collected body out (no copy).
    func takeBody() -> Data? {
        guard task.options.collectsBody else { return nil }
        defer { body = Data() }
        return body
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
