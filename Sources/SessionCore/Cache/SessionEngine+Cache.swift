import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a task carries from the cache lookup to its completion.
struct CacheContext: Sendable {
    /// The entry found (answered by a 304 when it was revalidated).
    var entry: CachedResponse?
    /// Whether Curlew sent the conditional fields (a caller's own If-None-Match gets its 304).
    var revalidates: Bool
    /// When the lookup ran: the request time of what gets stored.
    var requestDate: Date
    /// Whom the request spoke for at the lookup (its credentials and cookies).
    var identity: CacheIdentity
    /// The manager's private-cache partition at the lookup.
    var partition: UUID
    /// The trust the request is admitted under at the lookup (`SessionEngine.cacheTrust(for:)`);
    /// nil for one no TLS check stands behind.
    var trust: CacheTrust?
}

extension SessionEngine {
    /// `request` with the configuration's additional header fields it does not set itself:
    /// the fields `Vary` is matched on are the ones sent.
    func sentFields(of request: URLRequest) -> URLRequest {
        var sent = request
        for (name, value) in configuration.httpAdditionalHeaders where request.value(forHTTPHeaderField: name) == nil {
            sent.setValue(value, forHTTPHeaderField: name)
        }
        return sent
    }

    /// Whether the response cache answers or stores for `task`: a GET data task whose
    /// completion handler receives the body, and that asks for the whole representation.
    /// A `Range` request goes past the cache both ways: the stored whole body is no answer to
    /// it (the caller wants a 206), and its 206 neither replaces nor evicts the stored one.
    func consultsCache(_ task: SessionTask) -> Bool {
        task is DataTask && !(task is UploadTask) && !task.streamsBody && task.options.collectsBody
            && !task.options.skipsSerializer && (task.originalRequest?.httpMethod ?? "GET") == "GET"
            && task.originalRequest?.value(forHTTPHeaderField: "Range") == nil
            // A request naming its own `Host` reaches the URL's server as another site (and
            // libcurl picks the jar's cookies by that name): the URL, which entries are keyed
            // by, does not say which site answered, nor whose cookies went.
            && task.originalRequest?.value(forHTTPHeaderField: "Host") == nil && !additionalHeadersNameHost
    }

    /// Registers the manager with its cache (a cache several managers use is a shared one).
    func attachToResponseCache() {
        configuration.responseCache?.attach(cachePartition)
    }

    /// A reset session (the logout path) starts a new private-cache partition: the previous
    /// user's personal entries are never answered again, and are dropped.
    func renewCachePartition() {
        let previous = cachePartition.renew()
        configuration.responseCache?.removeEntries(inPartition: previous)
    }

    /// Looks `task` up in `cache` on the cache's queue, then answers it from the cache, or
    /// starts its transfer (with conditional fields when revalidating).
    func startThroughCache(_ task: SessionTask, cache: ResponseCache) {
        cache.queue.async { [self] in
            guard let original = task.originalRequest else { return submitStart(task) }
            let request = sentFields(of: original)
            let now = Date()
            let directives = CacheFreshness.directives(request.value(forHTTPHeaderField: "Cache-Control"))
            let policy = request.cachePolicy
            let cacheOnly = policy == .returnCacheDataDontLoad || directives["only-if-cached"] != nil
            let skipsLookup = directives["no-store"] != nil
                || policy == .reloadIgnoringLocalCacheData || policy == .reloadIgnoringLocalAndRemoteCacheData
            let identity = cacheIdentity(for: request)
            let partition = cachePartition.current
            let trust = cacheTrust(for: request)
            func context(_ entry: CachedResponse?, revalidates: Bool) -> CacheContext {
                CacheContext(
                    entry: entry, revalidates: revalidates, requestDate: now, identity: identity, partition: partition,
                    trust: trust)
            }
            guard !skipsLookup,
                let entry = cache.cachedResponse(for: request, identity: identity, partition: partition, trust: trust?.tag)
            else {
                if cacheOnly {
                    complete(task, outcome: TransferOutcome(error: .resourceNotCached, request: request))
                } else {
                    task.setCacheContext(context(nil, revalidates: false))
                    submitStart(task)
                }
                return
            }
            // A stored body larger than this manager keeps in memory (stored through another
            // manager sharing the cache) is never handed out, fresh or revalidated: the request
            // goes to the server, whose answer meets the limit as any answer does.
            let limit = configuration.maximumCollectedBodyBytes
            if limit > 0, entry.body.count > limit {
                if cacheOnly {
                    complete(task, outcome: TransferOutcome(error: .responseBodyTooLarge(limit: limit), request: request))
                } else {
                    task.setCacheContext(context(nil, revalidates: false))
                    submitStart(task)
                }
                return
            }
            let pragmaNoCache = request.value(forHTTPHeaderField: "Pragma")?.lowercased().contains("no-cache") ?? false
            switch CacheFreshness.decide(
                entry: entry, policy: policy, requestDirectives: directives, pragmaNoCache: pragmaNoCache, now: now,
                shared: cache.isShared)
            {
            case .useCached where Self.isConditional(request):
                // The caller's own validators meet a fresh entry: answered as the server would,
                // 304 when they still describe it, else the stored response whole.
                let matches = CacheFreshness.satisfiesCallersCondition(request, entry: entry, now: now)
                let head = matches ? CacheFreshness.notModifiedHead(for: entry) : entry.head
                answerFromCache(task, request: request, head: head, body: matches ? Data() : entry.body)
            case .useCached:
                answerFromCache(task, request: request, head: entry.head, body: entry.body)
            case .revalidate:
                let callerValidates = Self.isConditional(request)
                if !callerValidates { task.addHeaderLines(CacheFreshness.conditionalHeaderLines(for: entry)) }
                task.setCacheContext(context(entry, revalidates: !callerValidates))
                submitStart(task)
            case .fetch:
                task.setCacheContext(context(entry, revalidates: false))
                submitStart(task)
            }
        }
    }

    /// Whether the caller sent validators of its own (`If-None-Match`, `If-Modified-Since`).
    static func isConditional(_ request: URLRequest) -> Bool {
        request.value(forHTTPHeaderField: "If-None-Match") != nil || request.value(forHTTPHeaderField: "If-Modified-Since") != nil
    }

    /// Applies the cache to a finished transfer before it completes (on the cache's queue): a
    /// 304 to Curlew's own revalidation becomes the stored response; a storable response is
    /// stored; a successful unsafe method removes its URL's entry.
    /// A successful unsafe method (POST, PUT, PATCH, DELETE...) removes its URL's entry
    /// (RFC 9111 §4.4), on the cache's queue.
    func invalidateCache(_ cache: ResponseCache, after task: SessionTask, head: HTTPResponseHead?) {
        guard let head, (200..<400).contains(head.statusCode), let request = task.originalRequest else { return }
        let method = request.httpMethod ?? "GET"
        guard method != "GET", method != "HEAD" else { return }
        cache.queue.async { cache.removeCachedResponse(for: request) }
    }

    /// The same at the head of a streamed unsafe request's response (driver thread; the
    /// caller checked the method and status): `bytes(for:)` returns at the head, and a GET the
    /// caller sends next, while the stream still runs or after leaving it, must not be
    /// answered from the entry the request changed. Its lookup queues behind this on the
    /// cache's queue.
    func invalidateCacheAtHead(_ cache: ResponseCache, of task: SessionTask) {
        cache.queue.async {
            guard let request = task.originalRequest else { return }
            cache.removeCachedResponse(for: request)
        }
    }

    func applyCache(_ cache: ResponseCache, to task: SessionTask, outcome: TransferOutcome) -> TransferOutcome {
        guard outcome.error == nil, let head = outcome.head, let original = task.originalRequest,
            let context = task.takeCacheContext()
        else { return outcome }
        let request = sentFields(of: original)
        let now = Date()
        // The answer is filed under the identity the lookup used only if the request sent last
        // spoke for it: a retry's adapter may have sent another `Authorization` (a refreshed
        // token, another account), the jar's cookies may have changed, the session may have
        // been reset. Otherwise nothing is stored.
        let sent = sentFields(of: outcome.request ?? original)
        // An answer from a server the challenge handler trusted for this task alone is this
        // task's: stored, it would answer other tasks (and, on disk, other processes) that the
        // policy would have refused that server. It neither fills nor refreshes an entry.
        // Nor is one whose policy changed while it ran: which policy admitted it is not known.
        let sameIdentity = cacheIdentity(for: sent) == context.identity && cachePartition.current == context.partition
            && !outcome.admittedByTrustOverride && (context.trust.map { $0.generation == security.tag } ?? true)
            // An `http://` answer that came in the clear is no answer HSTS-upgraded requests,
            // looked up under the same trust, may be given (RFC 6797 §8.3: the upgrade comes
            // before anything else); with HSTS on, plain answers are not kept.
            && !outcome.answeredInTheClear
        // After an answered authentication challenge the request carried credentials the
        // cache never saw (libcurl added them): it cannot tell whom the answer is for.
        let challenged = outcome.metrics?.transactionMetrics.contains { $0.statusCode == 401 } ?? false
        if head.statusCode == 304 {
            guard let entry = context.entry else { return outcome }
            if outcome.request?.url != original.url {
                // A 304 from the end of a redirect speaks of that URL's representation (an
                // entity tag is the resource's own), not of the entry asked about, which the
                // redirect outdated: refreshed, the entry was filed under the hop's URL and
                // answered it with the first URL's body.
                cache.removeCachedResponse(for: request)
                return outcome
            }
            // Only the entry whose validators the request carried is updated (RFC 9111 §4.3.4);
            // a caller's own conditional request gets its 304 as is either way.
            guard CacheFreshness.notModified(head, describes: entry, callerRequest: context.revalidates ? nil : request)
            else {
                // Curlew's validators, answered by a 304 naming others: the stored response
                // answers, left stale (revalidated next time).
                return context.revalidates ? answer(outcome, with: entry) : outcome
            }
            let refreshed = CacheFreshness.refreshed(entry, with: head, requestDate: context.requestDate, now: now)
            // Not after a challenge: the entry (anonymous, say) would be made fresh by an answer
            // given to credentials, and answer without them meanwhile.
            if sameIdentity, !challenged { file(refreshed, for: sent, in: cache, context: context) }
            return context.revalidates ? answer(outcome, with: refreshed) : outcome
        }
        // Stored under the URL asked for only when no redirect intervened.
        guard let body = outcome.body, outcome.request?.url == original.url, sameIdentity else { return outcome }
        let requestDirectives = CacheFreshness.directives(request.value(forHTTPHeaderField: "Cache-Control"))
        let responseDirectives = CacheFreshness.directives(head.value(forHTTPHeaderField: "Cache-Control"))
        let vary = head.value(forHTTPHeaderField: "Vary")
        let varyNames = (vary?.split(separator: ",") ?? []).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if configuration.httpShouldSetCookies, varyNames.contains("cookie") {
            // The Cookie field comes from the jar, which changes under the cache: a
            // response that varies on it is never answered from the cache.
            cache.removeCachedResponse(for: request)
            return outcome
        }
        let explicit = CacheFreshness.hasExplicitFreshness(
            responseDirectives, expires: head.value(forHTTPHeaderField: "Expires"))
        guard !challenged, CacheFreshness.isStorable(
            statusCode: head.statusCode, response: responseDirectives, request: requestDirectives, vary: vary,
            hasExplicitFreshness: explicit)
        else {
            // A server error is no new representation: the stored one stays (RFC 9111 §4.3.3
            // lets a cache forward a 5xx and keep what it has), so an outage leaves the
            // offline fallback (`returnCacheDataDontLoad`) its answer. Any other answer the
            // cache may not keep replaces, and so removes, the stored one.
            if head.statusCode < 500 || responseDirectives["no-store"] != nil {
                cache.removeCachedResponse(for: request)
            }
            return outcome
        }
        var varying: [String: String?] = [:]
        // The identity's fields are matched through the identity: no value of theirs is kept.
        for field in varyNames where !field.isEmpty && !CacheIdentity.fieldNames.contains(field) {
            varying[field] = sent.value(forHTTPHeaderField: field)
        }
        let entry = CachedResponse(
            url: head.url, statusCode: head.statusCode, httpVersion: head.httpVersion,
            fields: head.fields.map { CachedResponse.Field(name: $0.name, value: $0.value) }, body: body,
            requestDate: context.requestDate, responseDate: now, varyingRequestFields: varying)
        file(entry, for: sent, in: cache, context: context)
        return outcome
    }

    /// Completes `task` with a stored response, through what a response from the network
    /// meets: the monitors hear it (no `willSend`: nothing goes out), the data task's response
    /// hook decides (`.cancel` ends it cancelled, `.becomeDownload` puts the body in a file) and
    /// the data hook is given the body, on the operation queue where they run; the completion
    /// follows. The hooks were not asked at all, so a hook's `.cancel` was passed by and a
    /// `.becomeDownload` gave no file.
    private func answerFromCache(_ task: SessionTask, request: URLRequest, head: HTTPResponseHead, body: Data) {
        // The whole body is here: its size is the total, whatever `Content-Length` says (a body
        // stored decoded keeps the field of its encoded form).
        task.didReceive(head: head, announced: Int64(body.count))
        monitorHub?.emit(.received(task, head))
        let outcome = TransferOutcome(error: nil, request: request, head: head, body: body)
        let hooks = self.hooks
        guard let dataTask = task as? DataTask, hooks.dataTaskDidReceiveResponse != nil || hooks.dataReceived != nil else {
            task.didReceiveBodyBytes(Int64(body.count))
            return complete(task, outcome: outcome)
        }
        operationQueue.async { [self] in
            var disposition = ResponseDisposition.allow
            if let hook = hooks.dataTaskDidReceiveResponse, let response = head.httpURLResponse {
                disposition = hook(dataTask, response)
            }
            if disposition == .becomeDownload && task.options.keepsBodyInMemory { disposition = .allow }
            switch disposition {
            case .cancel:
                // Cancelled at the head: no body byte was taken, as from the network.
                task.noteCancelledByCaller()
                complete(task, outcome: TransferOutcome(error: .cancelled, request: request, head: head))
            case .becomeDownload:
                task.didReceiveBodyBytes(Int64(body.count))
                complete(task, outcome: storedBodyAsFile(body, request: request, head: head))
            case .allow:
                task.didReceiveBodyBytes(Int64(body.count))
                if let hook = hooks.dataReceived, !body.isEmpty { hook(dataTask, body) }
                complete(task, outcome: outcome)
            }
        }
    }

    /// A stored body written to a new temporary download file, as a `.becomeDownload` from
    /// the network would have written it.
    private func storedBodyAsFile(_ body: Data, request: URLRequest, head: HTTPResponseHead) -> TransferOutcome {
        let url = DownloadOptions.newFileURL(for: configuration)
        do throws(SessionError) {
            let file = try DownloadFile(url: url)
            file.plan(statusCode: head.statusCode, contentRange: nil, entityTag: nil, lastModified: nil, isContentEncoded: false, hasBody: true)
            if let failure = body.withUnsafeBytes({ file.write($0) }) ?? file.prepareForEnd() {
                file.finish(keep: false)
                return TransferOutcome(error: failure, request: request, head: head)
            }
            file.finish(keep: true)
            return TransferOutcome(error: nil, request: request, head: head, fileURL: url)
        } catch {
            return TransferOutcome(error: error, request: request, head: head)
        }
    }

    /// The response a 304 to Curlew's own revalidation of `task` stands for, as the task will
    /// complete with it (`applyCache`): the stored one, its fields refreshed by the 304's when
    /// the 304 describes it. Nil for a caller's own conditional request (the 304 is theirs) and
    /// for a task the cache is not revalidating, or whose 304 came from the end of a redirect.
    /// For the response hook, which decides where the body goes by the response it is shown
    /// (operation queue).
    func storedHead(answering head: HTTPResponseHead, for task: SessionTask) -> HTTPResponseHead? {
        guard head.statusCode == 304, let context = task.cacheContext, context.revalidates, let entry = context.entry,
            head.url == task.originalRequest?.url
        else { return nil }
        guard CacheFreshness.notModified(head, describes: entry, callerRequest: nil) else { return entry.head }
        return CacheFreshness.refreshed(entry, with: head, requestDate: context.requestDate, now: Date()).head
    }

    /// `outcome` answered by `entry` (a 304 to Curlew's revalidation). When the response hook
    /// sent the body to a file (`.becomeDownload`), the file holds the 304's empty body: the
    /// stored body is written there, and the task completes with the file, as with any other
    /// answer the hook sent to one.
    private func answer(_ outcome: TransferOutcome, with entry: CachedResponse) -> TransferOutcome {
        guard let file = outcome.fileURL else { return outcome.with(head: entry.head, body: entry.body) }
        if let reason = Self.replaceContents(of: file, with: entry.body) {
            unlink(file.path)
            let failure = SessionError.fileWriteFailed("cannot write the stored response to '\(file.path)': \(reason)")
            return TransferOutcome(
                error: failure, request: outcome.request, head: entry.head, body: nil, metrics: outcome.metrics,
                bodyWentToUserCode: outcome.bodyWentToUserCode)
        }
        return outcome.with(head: entry.head, body: nil)
    }

    /// Writes `body` over the download file at `file`, opened without following a link (the
    /// download directory may be shared, as `DownloadFile` assumes); the reason on failure.
    private static func replaceContents(of file: URL, with body: Data) -> String? {
        let descriptor = open(file.path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        var reason = DescriptorWrite.writeAll(body, to: descriptor)
        if close(descriptor) != 0, reason == nil { reason = String(cString: strerror(errno)) }
        return reason
    }

    /// Stores `entry` for the request's identity, in the manager's partition when it is
    /// personal (`CacheScope`); removes the URL's entry when the cache may not keep it.
    private func file(
        _ entry: CachedResponse, for request: URLRequest, in cache: ResponseCache, context: CacheContext
    ) {
        let shared = cache.isShared
        let directives = CacheFreshness.directives(entry.value(forHTTPHeaderField: "Cache-Control"))
        // A 304 that says `no-store` (merged into the refreshed entry) or `Vary: *` takes the
        // stored response out of the cache (RFC 9111 §5.2.2.5, §4.1).
        guard directives["no-store"] == nil, entry.value(forHTTPHeaderField: "Vary")?.contains("*") != true,
            let scope = CacheScope.of(
            responseDirectives: directives, authorized: CacheIdentity.isAuthorized(request), cacheIsShared: shared),
            CacheFreshness.lifetime(of: entry, shared: shared) > 0 || CacheFreshness.hasValidator(entry)
        else {
            cache.removeCachedResponse(for: request)
            return
        }
        var tagged = entry
        tagged.identityTag = context.identity.tag()
        tagged.partition = scope == .personal ? context.partition : nil
        tagged.trustTag = context.trust?.tag
        cache.store(tagged, for: request)
    }
}
