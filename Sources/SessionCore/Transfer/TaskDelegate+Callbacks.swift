import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What curl's callbacks do with the response for this transfer (driver thread, inside
/// curl_multi_perform): its head, its body, the response hook. The request body's side:
/// `TaskDelegate+Sending.swift`.
extension TaskDelegate {
    // MARK: - Callbacks (driver thread, inside curl_multi_perform)

    /// libcurl resolves or connects for this transfer: it has left the wait for a connection.
    func isConnecting() {
        guard !state.hasConnection else { return }
        passClock.noteStarted(state.connecting(now: passClock.now))
    }

    /// libcurl picked the connection (new or reused) and is about to send the request.
    /// False refuses it (TLS admission: a connection not verified under the current policy).
    func connectionIsReady() -> Bool {
        isConnecting()
        guard let context = securityState.tlsAdmission else { return true }
        return context.admitRequest()
    }

    func didReceiveHeaderLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
        state.noteActivity(now: passClock.now)
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
            guard state.nextResponseBegins() else {
                failure = .badServerResponse("a second response arrived while the response hook was deciding on the first")
                return false
            }
            responseHead = nil
            securityState.isWithheldForChallenge = false
            body.reset()
            heldBodyWasCut = false
            isContentEncoded = false
            decodedBodyBytes = 0
            lastWritePaused = false
            bodyBytesDelivered = 0
            download?.forgetPlan()
            return true
        case .headComplete:
            let response = head.makeHead(url: prepared.url)
            responseHead = response
            storeCookies(from: response)
            if response.statusCode == 417, refusesExpectation() { return false }
            isContentEncoded = head.hasContentCoding
                ?? (response.value(forHTTPHeaderField: "Content-Encoding").map { $0.lowercased() != "identity" } ?? false)
            let hop = RedirectPolicy.nextHop(from: request, response: response)
            let disposition: TransferStateMachine.HeadDisposition =
                if let hop { .redirect(hop) } else if withholdsForChallenge(response) { .challenge }
                else if holdsForRetrier(response) { .heldForRetrier } else { .deliver }
            let waitedForProducer = state.awaitsBodyProducer
            state.headReceived(disposition, now: passClock.now)
            // The server answered while the body's producer was behind: its silence counts
            // again from now, and the loop must check by the new deadline.
            if waitedForProducer {
                passClock.noteStarted(state.clock.nextWake)
                // libcurl ends a transfer only once no pause bit is left, and the send pause
                // of a read callback that answered `CURL_READFUNC_PAUSE` stays even when the
                // answer stops the sending (an early 413): the loop lifts it after this pass.
                queueSendPauseLift()
            }
            let expected = head.expectedContentLength ?? response.expectedContentLength
            if disposition == .deliver {
                let announced = announcedLength(expected)
                if let download {
                    planDownload(download, for: response)
                    // This answer is not the task's (a refused or changed range, or an error
                    // status refusing a resumed download). A short body (a 416's) is read and
                    // dropped, keeping the connection; a long or unknown one (a changed file's
                    // whole 200, a 503 whose body never ends) is cut here rather than read to its
                    // end (`error(for:)` reads this abort as no error). The request goes again
                    // without the range, or the task fails with the status.
                    if download.dropsBody { return expected >= 0 && expected <= Self.droppedBodyLimit }
                    reportDownloadResumed(download, expectedLength: announced)
                }
                // A body announced past what may be kept in memory is refused before it is
                // read (unless the response hook may yet send it to a file instead). A HEAD's,
                // 204's or 304's `Content-Length` announces no body that follows.
                if collectedBodyLimit > 0, expected > collectedBodyLimit, !(isContentEncoded && decodesBody),
                    download == nil, !asksResponseHook, prepared.methodKind != .head,
                    response.statusCode != 204, response.statusCode != 304
                {
                    failure = .responseBodyTooLarge(limit: Int(collectedBodyLimit))
                    return false
                }
                deliverHead(response, expected: announced)
            }
            return true
        }
    }

    /// Whether a 417 refused the caller's own `Expect: 100-continue`: the exchange is then cut
    /// here, before anything of the 417 reaches the task. libcurl answers such a 417 by sending
    /// the request again, but with the caller's header list, expectation included: a server
    /// that refuses expectations got the same request again and again, hundreds a minute, the
    /// monitors hearing each 417, until the idle timeout. The driver sends it once more
    /// without the expectation (`dropsExpectation`).
    ///
    /// The expectation is read from the header lines libcurl was given (the request's fields
    /// and the configuration's `httpAdditionalHeaders`), as libcurl reads it. A body that
    /// cannot go again is left to libcurl: it resends nothing once the body was sent, and
    /// fails the rewind otherwise; the 417 and its body are then the answer.
    private func refusesExpectation() -> Bool {
        guard !dropsExpectation, prepared.hasExpectHeader, canReplayBody,
            prepared.headerLines.contains(where: { line in
                line.utf8.count > 7 && line.prefix(7).lowercased() == "expect:" && line.lowercased().contains("100-continue")
            })
        else { return false }
        refusedExpectation = true
        return true
    }

    /// The delivered response's head goes to the task, its stream, the monitors and the
    /// response hook.
    private func deliverHead(_ response: HTTPResponseHead, expected: Int64) {
        task.didReceive(head: response, announced: expected, offset: download?.plannedOffset ?? 0)
        if let responseStream {
            headWentToStream = true
            // The request the caller sent decides, not this hop's: a POST a 303 turned into a
            // GET changed the resource too.
            if let cache = engine.configuration.responseCache, (200..<400).contains(response.statusCode),
                (prepared.methodKind != .get && prepared.methodKind != .head)
                    || (state.redirectCount > 0 && Self.isUnsafe(task.originalRequest))
            {
                engine.invalidateCacheAtHead(cache, of: task)  // before the caller can send a GET
            }
            responseStream.receive(head: response)
        }
        if let hub = engine.monitorHub { hub.emit(.received(task, response)) }
        if asksResponseHook { askResponseHook(response) }
        if task.options.collectsBody { body.expect(expected) }
    }

    /// Whether `request`'s method is one that changes the resource (neither GET nor HEAD).
    private static func isUnsafe(_ request: URLRequest?) -> Bool {
        let method = request?.httpMethod ?? "GET"
        return method != "GET" && method != "HEAD"
    }

    /// Decides (at the response head) whether a failure status is held back from user code
    /// that sees the body as it arrives, while the retrier may still send the request again.
    /// Once body bytes reach user code an attempt is never sent again, so before this a 401
    /// that an `AuthenticationInterceptor` would refresh and retry, or a 503 a `RetryPolicy`
    /// would, went to the caller instead: for `bytes(for:)` (and the OpenAPI transport on it),
    /// which returns at the head; for a data handler; and for every data task of a manager
    /// with a data-received hook, so that merely observing bytes turned retries off. Held,
    /// the body is kept aside (up to the stream's or handler's buffer) and the retrier is
    /// asked when it ends, as for a collected response; not retried, the head and body go to
    /// user code then. Only when the retrier could act (a body that can be sent again) and
    /// no response hook is asked at the head (it is never asked about a stream).
    private func holdsForRetrier(_ response: HTTPResponseHead) -> Bool {
        response.statusCode >= 400 && deliversBody && !asksResponseHook && canReplayBody
            && engine.retrier(for: task) != nil
    }

    /// The body length the task announces for a head that announced `expected`. libcurl
    /// decodes a content-coded body (`decodesBody`): `Content-Length` counts the encoded
    /// bytes, the task the decoded ones, whose number nobody announced. Progress is
    /// indeterminate then (-1), as for a chunked body, rather than past 100% (1 MiB of zeros
    /// gzipped to 1 KB read 99,769%).
    private func announcedLength(_ expected: Int64) -> Int64 {
        isContentEncoded && decodesBody ? -1 : expected
    }

    /// A held-back failure's body outgrew what may be kept: the response goes to user code
    /// after all (its head, the kept bytes, then the rest as it arrives), and the retrier is
    /// no longer asked about it.
    private func releaseHeldResponse() {
        guard let response = responseHead, let streamCredit else { return }
        state.headReceived(.deliver, now: passClock.now)
        deliverHead(response, expected: announcedLength(head.expectedContentLength ?? response.expectedContentLength))
        let kept = body.take()
        guard !kept.isEmpty else { return }
        handToUserCode(kept, credit: streamCredit)
        // A collected body keeps what it had (the hook saw a copy).
        if task.options.collectsBody { kept.withUnsafeBytes { _ = body.append($0) } }
        bodyBytesDelivered += Int64(kept.count)
    }

    /// Hands `chunk` to the code that sees the body as it arrives: the stream's consumer (and
    /// the data-received hook a copy), or the data handler and the hook; `credit` counts it
    /// for backpressure.
    private func handToUserCode(_ chunk: Data, credit: StreamCredit) {
        credit.add(StreamCredit.cost(of: chunk.count))
        if let responseStream {
            responseStream.append(chunk)
            if let dataReceivedHook {
                credit.add(StreamCredit.cost(of: chunk.count))  // the hook's copy, until it ran
                engine.deliverToHook(chunk, for: task, hook: dataReceivedHook, credit: credit)
            }
        } else {
            engine.deliver(chunk, for: task, hook: dataReceivedHook, credit: credit)
        }
    }

    /// The task ends with a response its body's code was not given at the head: a stream's
    /// consumer gets `head` (a 3xx the redirection hook declined, a 401 nobody answered, a
    /// failure the retrier declined) and the body kept aside for it, as `data(for:)` would; a
    /// data handler or the data-received hook gets a held failure's body. Before the
    /// completion, which follows the chunks through the operation queue. `collected`: the
    /// body the completion carries, when the task collects it.
    func deliverWithheldResponse(_ head: HTTPResponseHead, collected: Data?) {
        let kept: Data
        if let responseStream {
            guard !headWentToStream else { return }
            headWentToStream = true
            responseStream.receive(head: head)
            kept = body.take()
        } else {
            guard case .heldForRetrier? = state.headDisposition else { return }
            kept = collected ?? body.take()
        }
        guard !kept.isEmpty, let streamCredit else { return }
        handToUserCode(kept, credit: streamCredit)
    }

    /// The most received (encoded) body bytes the decoded ones can have come from, as the
    /// decompression guard judges them: libcurl's count (`SIZE_DOWNLOAD`). For a chunked body
    /// libcurl 7.88 counts a read only after it decoded and wrote it (and not at all when its
    /// pause buffer overflowed), so while a read is written one read's worth is added: judged
    /// against nothing, the first read of a chunked body (512 KiB of a download's text
    /// decoding to 3 MB) was refused as a bomb. What a pause kept was counted when its read
    /// ended. A bomb whole in one read is judged at the end (`decodedBodyExceedsLimitAtEnd`).
    /// At least 1.
    func encodedBodyBytesBound() -> Int64 {
        let counted = max(0, easy.receivedByteCount ?? 0)
        return max(1, receivedCountLagsARead && !replaysPausedBody ? counted + receiveBufferBytes : counted)
    }

    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> WriteDecision {
        // Suspended, or the response hook has not answered (`TransferStateMachine.bodyArrived`).
        guard state.bodyArrived(now: passClock.now) == .take else {
            lastWritePaused = true
            return .pause
        }
        // An answer arriving while the body's producer is behind: libcurl stops the sending of
        // an answer with `Connection: close` only in the pass its body completes (and a
        // producer may fall behind after the head), so the send pause is lifted after each
        // pass that brought body bytes. Not after every pass: each lift runs the transfer
        // again at once, and its read callback pauses again.
        if state.awaitsBodyProducer { queueSendPauseLift() }
        // Backpressure first: libcurl hands a paused chunk over again on every unpause, so a
        // chunk refused here must not have been counted (the decompression guard) yet.
        if state.deliversResponse, let streamCredit, streamCredit.shouldPause() {
            // The consumer fell behind: not the server's silence, so not idle time.
            state.consumerFellBehind(now: passClock.now)
            lastWritePaused = true
            return .pause
        }
        lastWritePaused = false
        decodedBodyBytes += Int64(bytes.count)
        if isContentEncoded {
            // Compression-bomb guard, over every body (held back or not).
            let limit = engine.configuration.decompressionLimit  // not a copy of the whole struct per chunk
            if decodedBodyBytes > Int64(engine.configuration.decompressionAllowance),
                decodedBodyBytes / encodedBodyBytesBound() > Int64(limit)
            {
                failure = .decompressionLimitExceeded(ratio: limit)
                return .abort
            }
        }
        if !state.deliversResponse {
            if case .heldForRetrier? = state.headDisposition {
                // A failure held for the retrier is kept up to the stream's or handler's
                // buffer; past it, the response is user code's after all, and this chunk is
                // delivered below. A task that collects its body keeps no more than its limit.
                if collectedBodyLimit > 0, Int64(body.count + bytes.count) > collectedBodyLimit {
                    failure = .responseBodyTooLarge(limit: Int(collectedBodyLimit))
                    return .abort
                }
                if let streamCredit, body.count + bytes.count > streamCredit.limit {
                    releaseHeldResponse()
                } else {
                    _ = body.append(bytes)
                    return .accepted
                }
            } else {
                // A redirect's body (or a withheld 401's) is kept, capped, only in case it turns
                // out to be the answer; past the cap that answer fails (`outcome(of:error:)`).
                if !heldBodyWasCut, Int64(body.count) + Int64(bytes.count) <= heldBodyLimit {
                    _ = body.append(bytes)
                } else {
                    heldBodyWasCut = true
                }
                return .accepted
            }
        }
        // Before any user code sees the chunk (the data-received hook of a collecting task):
        // a chunk past the limit goes nowhere.
        if collectedBodyLimit > 0, download == nil, bodyBytesDelivered + Int64(bytes.count) > collectedBodyLimit {
            failure = .responseBodyTooLarge(limit: Int(collectedBodyLimit))
            return .abort
        }
        if let streamCredit { handToUserCode(Data(bytes), credit: streamCredit) }
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
            failure = .outOfMemory("the response body outgrew the memory the system would map for it (\(body.count) bytes kept)")
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
            entityTag: response.value(forHTTPHeaderField: "ETag"), lastModified: response.value(forHTTPHeaderField: "Last-Modified"),
            isContentEncoded: isContentEncoded, hasBody: prepared.methodKind != .head)
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
    func askResponseHook(_ head: HTTPResponseHead) {
        guard let hook = engine.hooks.dataTaskDidReceiveResponse, let dataTask = task as? DataTask else { return }
        state.responseHookAsked(now: passClock.now)
        let engine = self.engine
        let keepsBodyInMemory = task.options.keepsBodyInMemory
        engine.operationQueue.async {
            // A 304 to the cache's own revalidation is shown as the stored response it stands
            // for, which the task completes with (and whose body a `.becomeDownload` file holds).
            let shown = engine.configuration.responseCache == nil ? head : engine.storedHead(answering: head, for: dataTask) ?? head
            var disposition = shown.httpURLResponse.map { hook(dataTask, $0) } ?? .allow
            if disposition == .becomeDownload && keepsBodyInMemory { disposition = .allow }
            engine.submit(.responseDecision(dataTask, disposition))
        }
    }
}
