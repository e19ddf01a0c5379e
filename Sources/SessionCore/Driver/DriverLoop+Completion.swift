internal import CCurl
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What follows an exchange that ended: the decision (`TransferStateMachine.exchangeEnded`),
/// redirects, retries on the same delegate, and the task's completion.
extension DriverLoop {
    // MARK: - Completion

    func readCompletions() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var pointer: UnsafeMutableRawPointer?
            guard curlew_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &pointer) == CURLE_OK,
                let delegate = CurlCallbacks.delegate(pointer)
            else { continue }
            transferDidEnd(delegate, code: code)
        }
    }

    /// Lifts the send pause of each transfer whose server answered in this pass while its
    /// request body's producer was behind, or sent more of that answer's body
    /// (`PassClock.answeredWhileSendPaused`).
    ///
    /// libcurl 7.88 reports a transfer done only when no pause bit is left, and an answer that
    /// stops the sending (an error status before the body was sent: "stop sending"; with
    /// `Connection: close`, the end of its body) clears the sending but not the pause
    /// `CURL_READFUNC_PAUSE` set. The task then waited for the
    /// producer's next chunk, the silence probe or its timeout with its whole answer in. With
    /// the pause lifted, a transfer that stopped sending ends once its answer is read; one
    /// still sending (a server that answers early and reads on) calls the read callback
    /// again, which pauses again. A receive hold of Curlew's (a consumer behind, a response
    /// hook deciding) is kept; a suspended task's pause is lifted by its `resume()`.
    func liftSendPauses() {
        for delegate in passClock.answeredWhileSendPaused {
            delegate.sendPauseLiftQueued = false
            guard delegates[delegate.task] === delegate, delegate.state.maySend else { continue }
            engine.sendPauseLifts.add(1, ordering: .relaxed)
            delegate.sendPauseLiftPass = passClock.pass
            passClock.noteLift()
            unpause(delegate, delegate.state.holdsReceiving ? CURLPAUSE_RECV : CURLPAUSE_CONT)
        }
        passClock.answeredWhileSendPaused.removeAll(keepingCapacity: true)
    }

    /// Lifts pause bits of a transfer in curl (`curl_easy_pause`).
    ///
    /// Lifting a receive pause hands over, through the write callback and before
    /// `curl_easy_pause` returns, what libcurl read and kept meanwhile (for a content-coded
    /// body, all it decoded from its last read). When that hand-over fails, libcurl drops the
    /// rest and returns the error but does not end the transfer. After a refusal of the
    /// callback's own (the decompression guard, a download's disk, a collected body's limit)
    /// the transfer ended at libcurl's next pass when the body was all read, and otherwise
    /// waited for the rest, of which nothing would be delivered: until the server's next
    /// bytes, the silence probe or a timeout. A refusal of libcurl's (its header store
    /// rejecting a trailer line it kept, `CURLE_BAD_FUNCTION_ARGUMENT`) was lost, and the body
    /// ended as if whole, where without the pause the transfer fails. The exchange ends here
    /// instead, as a failure inside `curl_multi_perform` ends it.
    func unpause(_ delegate: TaskDelegate, _ action: Int32) {
        delegate.replaysPausedBody = true
        var code = curl_easy_pause(delegate.easy.raw, action)
        // `CURLE_BAD_FUNCTION_ARGUMENT` is also curl_easy_pause's answer for a transfer without
        // a connection (nothing paused, nothing to hand over): one not connected yet, or
        // libcurl's own follow-up (an authentication round, a 417's retry) waiting for one
        // under the connection caps, which still has its first answer's head. Asked again,
        // a transfer whose hand-over failed has the pause state it asked for and answers OK;
        // one without a connection answers the same as before.
        if code == CURLE_BAD_FUNCTION_ARGUMENT, curl_easy_pause(delegate.easy.raw, action) != CURLE_OK { code = CURLE_OK }
        delegate.replaysPausedBody = false
        // Commands run after each pass's `readCompletions`: no transfer libcurl ended is
        // still waiting to be told, so an attached one is libcurl's to end.
        guard code != CURLE_OK, delegate.state.phase == .attached else { return }
        transferDidEnd(delegate, code: code)
    }

    /// One exchange ended: gather the facts, let the state machine choose, carry it out.
    func transferDidEnd(_ delegate: TaskDelegate, code: CURLcode) {
        delegate.collectMetrics()
        let hooks = engine.hooks
        var facts = TransferStateMachine.EndFacts()
        facts.error = delegate.error(for: code)
        facts.refusedStaleConnection = delegate.shouldRetryOnFreshConnection(code: code) || lostReusedConnection(delegate, code: code)
        // Asked only when it can matter: taking a challenge counts an attempt.
        let answerable = hooks.answersChallenges || !engine.credentialStore.isEmpty
        let challenge = facts.refusedStaleConnection || !answerable ? nil : delegate.takePendingChallenge(code: code)
        facts.hasChallengeForHandler = challenge != nil
        facts.canReplayBody = delegate.canReplayBody
        facts.hasRedirectHook = hooks.redirect != nil
        facts.needsFullDownload = delegate.download?.needsFullRestart ?? false
        facts.expectationRefused = delegate.refusedExpectation
        // Every answer takes the transfer out of curl (the connection goes back to the pool
        // while a hook decides).
        guard let action = transition(delegate, { $0.exchangeEnded(facts, now: TaskDelegate.uptime) }) else { return }
        act(on: action, delegate: delegate, facts: facts, challenge: challenge, hooks: hooks)
    }

    /// Whether the exchange failed only because the kept-alive connection it reused was closed
    /// by the server as the request went out (an idle timeout; gunicorn 27 closing, after its
    /// answer, a connection whose unread upload exceeds its 64 KiB drain limit): then it is
    /// sent once more, on another connection. libcurl 7.88 does this itself when the loss shows
    /// as an end of stream, but not when it shows while the request body is being written
    /// ("Send failure: Broken pipe", seen on RedirectBodyTests' follow-up PUT to httpbin under
    /// TSan). Its own rule applies: a reused connection, no byte of an answer, a body that can
    /// be sent again.
    ///
    /// Over HTTP/2 the same loss (the connection ended before the stream got an answer) shows
    /// as `CURLE_PARTIAL_FILE`, "stream N was not closed cleanly before end of the underlying
    /// stream", which libcurl 7.88 never resends; over HTTP/1.1 that code comes only after a
    /// head, which the rule excludes. It is resent only for an idempotent method (RFC 9110
    /// §9.2.2): the end may follow a GOAWAY that covered the stream ("might have been
    /// processed", RFC 9113 §6.8), which the engine cannot see, and a stream that joined a
    /// connection another transfer had just opened counts as reused. The same code without
    /// that message (libcurl's reset of a stream after a GOAWAY, which can drop an answer it
    /// had read) is no lost connection.
    func lostReusedConnection(_ delegate: TaskDelegate, code: CURLcode) -> Bool {
        guard code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR || code == CURLE_GOT_NOTHING
            || (code == CURLE_PARTIAL_FILE && PreparedRequest.idempotentMethods.contains(delegate.prepared.method)
                && delegate.easy.errorMessage.hasSuffix("before end of the underlying stream")),
            !delegate.resentAfterLostReusedConnection, delegate.failure == nil, delegate.canReplayBody,
            delegate.responseHead == nil, let exchange = delegate.transactions.last,
            exchange.isReusedConnection, exchange.responseHeaderBytesReceived == 0
        else { return false }
        delegate.resentAfterLostReusedConnection = true
        return true
    }

    /// Carries out what the state machine chose for an exchange that ended.
    func act(
        on action: TransferStateMachine.EndAction, delegate: TaskDelegate, facts: TransferStateMachine.EndFacts,
        challenge: PendingChallenge?, hooks: SessionEngine.Hooks
    ) {
        switch action {
        case .finish(let error):
            endAttempt(delegate, error: error)
        case .retryOnFreshConnection:
            // Refused before sending because the connection or TLS session was verified under
            // another security policy: once more on a new connection, judged by the current one.
            retry(delegate, otherwise: facts.error)
        case .askChallengeHandler:
            if let challenge, let stored = delegate.storedCredential(for: challenge) {
                // The session remembers an answer for this protection space.
                transition(delegate) { _ = $0.challengeAnswered(now: TaskDelegate.uptime) }
                switch delegate.resolveChallenge(.useCredential(stored)) {
                case .retry: resend(answering: delegate)
                // The attempt ends as any other: a 401 or a refused server the answer leaves
                // standing goes to the retrier (an `AuthenticationInterceptor`, a `RetryPolicy`).
                case .fail(let error): endAttempt(delegate, error: error)
                case .deliver: endAttempt(delegate, error: nil)
                }
                return
            }
            guard let challenge, let hook = hooks.handler(for: challenge) else {
                // Nobody answers (the stored credential was tried already): the challenge is
                // over, and the attempt ends as any other. Without leaving the challenge's
                // phase first, the retrier's answer was dropped (it is taken only in the
                // retrier's phase) and the task waited for its resource timeout.
                transition(delegate) { _ = $0.challengeAnswered(now: TaskDelegate.uptime) }
                endAttempt(delegate, error: facts.error)
                return
            }
            // User code never runs on the driver: the handler answers on the operation
            // queue, and the transfer waits detached (nothing of it is on the wire).
            let task = delegate.task
            let driver = self.driver
            engine.operationQueue.async {
                let disposition = hook(task, challenge.makeChallenge())
                driver.submit(.challengeDecision(task, disposition))
            }
        case .follow(let hop):
            follow(delegate, to: hop.request, proposed: hop)
        case .restartDownloadFromZero:
            delegate.download?.restartWithoutRange()  // nothing is cut before the new answer's body
            retry(delegate, otherwise: nil)
        case .retryWithoutExpectation:
            delegate.dropsExpectation = true
            retry(delegate, otherwise: facts.error)
        case .waitForResponseDecision:
            break  // the facts wait in the phase until the hook answers
        case .askRedirectHook(let hop):
            guard let hook = hooks.redirect, let head = delegate.responseHead else {
                transition(delegate) { _ = $0.redirectAnswered(now: TaskDelegate.uptime) }
                follow(delegate, to: hop.request, proposed: hop)
                return
            }
            let task = delegate.task
            let driver = self.driver
            engine.operationQueue.async {
                // Foundation's response is built here, off the driver thread.
                let decision = head.httpURLResponse.map { hook(task, $0, hop.request) } ?? hop.request
                driver.submit(.redirectDecision(task, hop, decision))
            }
        }
    }

    /// Sends the next hop of a redirect chain on the same delegate and easy handle.
    ///
    /// `request` is what will be sent (the proposed hop, or what the redirection hook
    /// returned). The body goes along when the hop keeps it, unless the hook gave the request
    /// a body of its own.
    func follow(_ delegate: TaskDelegate, to decision: URLRequest, proposed: RedirectPolicy.Hop) {
        let redirectHead = delegate.responseHead  // `restart` forgets it
        let request = RedirectPolicy.hookDecision(decision, proposed: proposed.request, previous: delegate.request)
        if let from = delegate.request.url, let to = request.url, !RedirectPolicy.isSameOrigin(from, to) {
            delegate.hasCrossedOrigin = true
        }
        let hookSetBody = request.httpBody != proposed.request.httpBody
            || request.httpBodyStream !== proposed.request.httpBodyStream
        let body: TaskDelegate.NextBody = proposed.keepsBody && !hookSetBody ? .same : .fromRequest
        do {
            let prepared = try PreparedRequest.prepare(
                request, configuration: engine.configuration, omittingCredentials: delegate.hasCrossedOrigin,
                urls: engine.parsedURLs)
            try delegate.restart(with: request, prepared: prepared, body: body)
        } catch {
            finish(delegate, outcome: outcome(of: delegate, error: error))
            return
        }
        if let hub = engine.monitorHub, let redirectHead { hub.emit(.redirect(delegate.task, redirectHead, request)) }
        delegate.easy.reset()
        attach(delegate)
    }

    /// Sends the request again with a challenge's answer. A 401 was withheld at its head (it
    /// is the task's response only if nobody answers it): the monitors hear of it now, before
    /// the next attempt's `willSend`, as they hear of every attempt's response. A server-trust
    /// challenge has no head.
    func resend(answering delegate: TaskDelegate) {
        if let hub = engine.monitorHub, let head = delegate.responseHead { reportUnheardHead(head, of: delegate, to: hub) }
        retry(delegate, otherwise: nil)
    }

    /// Sends the same request again on the same delegate (challenge answered, or a stale
    /// connection refused). When the body cannot be replayed, completes with `otherwise`
    /// (nil: the response as received).
    func retry(_ delegate: TaskDelegate, otherwise error: SessionError?) {
        guard delegate.prepareToRetry() else {
            // A body that cannot go again for a reason of its own (its file changed) says so;
            // a spent stream leaves the attempt's own outcome.
            finish(delegate, outcome: outcome(of: delegate, error: delegate.bodyReader?.rewindFailure ?? error))
            return
        }
        delegate.task.forgetEarlierAttemptsResponse(keepingByteCounts: delegate.download != nil)
        delegate.easy.reset()
        attach(delegate)
    }

    /// The task's outcome, always handed to `finish`. An exchange still in curl (a cancel, the
    /// resource timeout, a hook that cancelled) is recorded in the metrics first: they list
    /// every attempt, and the one cut short was missing (a 503 then a timed-out retry listed
    /// the 503 alone, beside `.timedOut`).
    func outcome(of delegate: TaskDelegate, error: SessionError?) -> TransferOutcome {
        if delegate.state.isAttached { delegate.collectMetrics() }
        // A held-back response that is the answer after all (a redirect the hook refused, a
        // 401 nobody answered) whose body outgrew what was kept for it: a failure, not a
        // body cut short without a word (a download's file, a data task's data).
        let error = error ?? delegate.heldBodyFailure
        return TransferOutcome(
            error: error, request: delegate.request, head: delegate.responseHead,
            body: error == nil ? delegate.takeBody() : nil, metrics: delegate.metrics,
            bodyWentToUserCode: delegate.deliversBody,
            admittedByTrustOverride: delegate.securityState.handshake?.admittedByTrustOverride ?? false,
            answeredInTheClear: delegate.securityState.handshake?.admittedInTheClear ?? false)
    }

    /// Removes the transfer from curl, recycles its handle, releases the delegate's retained
    /// reference and hands the outcome to the completion queue.
    func finish(_ delegate: TaskDelegate, outcome: TransferOutcome) {
        var outcome = outcome
        if delegate.download != nil {
            let (fileURL, resumePoint, error) = delegate.finishDownload(error: outcome.error)
            outcome = outcome.with(fileURL: fileURL, resumePoint: resumePoint, error: error)
        }
        if let hub = engine.monitorHub, let head = outcome.head {
            // A response the task completes with but was not told of at its head: a 3xx the
            // redirection hook declined, a 401 nobody answered, a failure held for the
            // retrier; also when its body then failed (a 3xx or a withheld 401 whose body
            // stalled past the timeout): the task's `response` is that head, and a collected
            // one was heard at its head. A followed hop's or an answered challenge's head is
            // gone by now (the next attempt starts without one).
            reportUnheardHead(head, of: delegate, to: hub)
        }
        if outcome.error == nil, let head = outcome.head { delegate.deliverWithheldResponse(head, collected: outcome.body) }
        // Ended during a back-off (cancelled, timed out, the session invalidated): the
        // scheduled retry goes now, not at its deadline, and with it the delegate and what it
        // holds (an upload's open file, a caller's stream and its pump, a held body).
        if delegate.state.phase == .awaitingRetry { scheduledRetries.removeAll { $0.delegate === delegate } }
        // Out of curl and out of its slot; the next transfer in line at its origin starts.
        transition(delegate) { $0.finish(now: TaskDelegate.uptime) }
        delegates.remove(delegate)
        recycle(delegate.easy)
        delegate.releaseSecurityContext()
        if let pointer = delegate.unmanagedSelf {
            delegate.unmanagedSelf = nil
            if delegate.easy.transferSlot.pointee == pointer { delegate.easy.transferSlot.pointee = nil }
            Unmanaged<TaskDelegate>.fromOpaque(pointer).release()
        }
        engine.complete(delegate.task, outcome: outcome, batch: completions)
        // The delegate (freed on this thread: it owns the easy handle) holds the only
        // reference to the prepared request; its URL, strings and parsed libcurl URL are
        // freed with the completions instead.
        completions.retire(delegate.prepared)
    }

    /// Tells the monitors of `head` unless the task was told of it at its arrival (the head
    /// was delivered): the one rule for a head that reached the monitors late, before a retry
    /// or at the end.
    func reportUnheardHead(_ head: HTTPResponseHead, of delegate: TaskDelegate, to hub: MonitorHub) {
        guard delegate.headReportedLate !== head, delegate.task.responseHead !== head else { return }
        delegate.headReportedLate = head
        hub.emit(.received(delegate.task, head))
    }

    func recycle(_ easy: EasyHandle) {
        // Freed by deinit: the pool is full, or libcurl tied the handle to a `Host` field's name.
        guard idleHandles.count < idleHandleLimit, !easy.isBoundToCookieHost else { return }
        easy.recycle()
        idleHandles.append(easy)
    }

    /// Frees every curl resource on this thread, then answers the shutdown requests.
    func teardown() {
        idleHandles.removeAll()  // curl_easy_cleanup in EasyHandle.deinit
        if network.savesHSTSFile && shareHoldsHSTS {
            // libcurl writes an HSTS cache to its file only when a handle that uses it is
            // freed: one is made and freed for that, before the cache goes with its share.
            if let cookieShare = engine.cookieShare {
                cookieShare.saveHSTS()
            } else if let easy = curl_easy_init() {
                _ = curlew_easy_setopt_pointer(easy, CURLOPT_SHARE, share)
                curl_easy_cleanup(easy)
            }
        }
        // Commands that raced with shutdown are answered, not dropped.
        for command in driver.close() { DriverLoop.reject(command, engine: engine) }
        curl_multi_cleanup(multi)
        curl_share_cleanup(share)
        cleanUpRetiredShares()
        for request in shutdownRequests { request() }
        shutdownRequests.removeAll()
    }
}
