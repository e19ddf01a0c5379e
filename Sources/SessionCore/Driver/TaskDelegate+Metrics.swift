internal import CCurl
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Metrics, the error and the body when an exchange ends (driver thread).
extension TaskDelegate {
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
            redirectCount: state.redirectCount)
    }

    /// The error for a finished transfer: Curlew's own reason first, then curl's code.
    func error(for code: CURLcode) -> SessionError? {
        if let failure { return failure }
        // A resumed download's refused answer, cut short on purpose at its head.
        if code == CURLE_WRITE_ERROR, download?.dropsBody == true { return nil }
        // A 417 to the caller's expectation, cut at its head on purpose (`refusesExpectation`).
        if code == CURLE_WRITE_ERROR, refusedExpectation { return nil }
        // An HTTP/2 answer that ended whole before the body, which is not sent (`didProgress`).
        if code == CURLE_ABORTED_BY_CALLBACK, answeredWhole, failure == nil { return nil }
        if let trustFailure = securityError(for: code) { return trustFailure }
        if code == CURLE_OK {
            guard responseHead != nil else { return .badServerResponse("the transfer ended without a response") }
            // A 206 cut short that libcurl took for a whole body: an error of the exchange,
            // so the retrier sees it and a retry continues the bytes.
            if state.deliversResponse, let shortfall = download?.shortfall { return shortfall }
            if let surplus = bodyReader?.surplusFailure { return surplus }
            return decodedBodyExceedsLimitAtEnd()
        }
        if code == CURLE_SEND_FAIL_REWIND { return bodyNotResendable() }
        if code == CURLE_OUT_OF_MEMORY, let overflow = pausedDecodingOverflow() { return overflow }
        // The proxy answered the CONNECT and refused the tunnel (407, 403, 502, ...). libcurl
        // reports `CURLE_RECV_ERROR`, which reads as a lost connection: a retrier would send the
        // same refused request again (a 407's wrong credential, again and again), and a wait
        // for connectivity would wait for a route that is there. Its own case, with the status:
        // whether to try again depends on it (a 502 may pass, a 407 will not), and a message
        // is not an API to parse.
        if let status = easy.info(long: CURLINFO_HTTP_CONNECTCODE), status != 0, !(200..<300).contains(status) {
            let message = easy.errorMessage
            return .proxyRefusedTunnel(statusCode: status, message: message.isEmpty ? "CONNECT answered \(status)" : message)
        }
        // A handshake the peer cut is the network's failure, not TLS's: a retrier retries it
        // and an event stream reconnects, as after any lost connection (a server restarting
        // resets the connections it accepted). A refusal by TLS itself (an alert, no shared
        // version, a certificate) keeps `tlsHandshakeFailed`.
        if code == CURLE_SSL_CONNECT_ERROR, handshakeWasCut() { return .networkLost(easy.errorMessage) }
        // TLS 1.3 ends the client's side of the handshake before the server's verdict on its
        // certificate: a refusal arrives as an alert at the first read or write, before any
        // answer. Such an alert is TLS refusing, which no retry or reconnection cures, not a
        // lost connection (one in the middle of a body stays a loss).
        if code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR, responseHead == nil, receivedTLSAlert() {
            return .tlsHandshakeFailed(easy.errorMessage)
        }
        return SessionError(curlCode: code, message: easy.errorMessage)
    }

    /// Whether libcurl's message is OpenSSL's report of an alert from the peer ("SSL
    /// routines" ... "alert certificate required", "alert unknown ca", ...). Bytes only.
    private func receivedTLSAlert() -> Bool {
        let message = easy.errorMessage.utf8
        return message.firstRange(of: "SSL routines:".utf8) != nil && message.firstRange(of: " alert ".utf8) != nil
    }

    /// Whether a failed handshake ended because the connection did: OpenSSL's verdict is an
    /// end of stream (`SSL_ERROR_SYSCALL`, or OpenSSL 3's "unexpected eof while reading" that
    /// newer libcurls report; libcurl names the verdict in its message), or the socket's
    /// error is a reset or a broken pipe. The message first: libcurl keeps the socket error of
    /// an address it gave up on (an IPv6 route that was not there) when another one connected.
    /// Bytes only: this runs on the driver thread.
    private func handshakeWasCut() -> Bool {
        let message = easy.errorMessage.utf8
        if message.firstRange(of: "SSL_ERROR_SYSCALL".utf8) != nil
            || message.firstRange(of: "unexpected eof while reading".utf8) != nil
        {
            return true
        }
        switch Int32(clamping: easy.info(long: CURLINFO_OS_ERRNO) ?? 0) {
        case ECONNRESET, EPIPE, ECONNABORTED: return true
        default: return false
        }
    }

    /// A chunked body is judged while it is read against one read more than libcurl has
    /// counted (`encodedBodyBytesBound`); at its end, against all it counted: a bomb that
    /// came whole in one read (4 KB decoding to 4 MiB) is refused then, and a download is not
    /// moved into place, a collected body not handed over.
    private func decodedBodyExceedsLimitAtEnd() -> SessionError? {
        guard isContentEncoded, receivedCountLagsARead,
            decodedBodyBytes > Int64(engine.configuration.decompressionAllowance)
        else { return nil }
        let limit = engine.configuration.decompressionLimit
        let encoded = max(1, easy.receivedByteCount ?? 1)
        return decodedBodyBytes / encoded > Int64(limit) ? .decompressionLimitExceeded(ratio: limit) : nil
    }

    /// libcurl decodes a whole socket read at once. While the transfer's receiving is paused
    /// (a stream's consumer behind, a response hook deciding, a suspended task) it keeps what
    /// it decoded but could not hand over in a buffer of its own, and fails with "out of
    /// memory" past 64 MiB (libcurl 7.88's `DYN_PAUSE_BUFFER`): at least that much came
    /// out of one read. Judged as the decompression guard would have judged it, had it seen
    /// those bytes; a ratio within the limit (a large receive buffer, a generous limit) is
    /// named for what it is rather than as the system's memory running out.
    private func pausedDecodingOverflow() -> SessionError? {
        guard isContentEncoded, lastWritePaused else { return nil }
        let pauseBuffer: Int64 = 64 << 20
        let decoded = decodedBodyBytes + pauseBuffer
        let encoded = encodedBodyBytesBound()
        let limit = engine.configuration.decompressionLimit
        if decoded > Int64(engine.configuration.decompressionAllowance), decoded / encoded > Int64(limit) {
            return .decompressionLimitExceeded(ratio: limit)
        }
        return .outOfMemory(
            "one read of the content-encoded response decoded to more than the 64 MiB libcurl keeps for a paused transfer (from at most \(encoded) bytes received); a smaller SessionConfiguration.receiveBufferSize lowers what one read can hold")
    }

    /// libcurl had to send the request again and could not take its body from the start (a
    /// caller's `InputStream`, or a stream body that is not rewindable, read once already):
    /// curl's own words ("seek callback returned error 2") say nothing a caller can act on.
    /// Without any answer, the only reason libcurl sends a request again is the kept-alive
    /// connection it reused closing first (a server's idle timeout racing the request): a lost
    /// connection. After an answer, it is libcurl's own authentication round (Digest, NTLM).
    /// (The metrics cannot tell: libcurl has opened the next connection before it asks for
    /// the body's start.)
    private func bodyNotResendable() -> SessionError {
        let stream = "the request body is a stream that can be read only once, so it cannot be sent again"
        if responseHead == nil {
            return .networkLost("the kept-alive connection closed before the response began, and \(stream)")
        }
        return .bodyStreamFailed("libcurl had to send the request again (an authentication round), but \(stream)")
    }

    /// Takes the collected body out (no copy).
    func takeBody() -> Data? {
        guard task.options.collectsBody, download == nil else { return nil }
        return body.take()
    }
}
