import Foundation
import Serialization
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
    /// completion handler receives the body.
    func consultsCache(_ task: SessionTask) -> Bool {
        task is DataTask && !(task is UploadTask) && !task.streamsBody && task.options.collectsBody
            && !task.options.skipsSerializer && (task.originalRequest?.httpMethod ?? "GET") == "GET"
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
            guard !skipsLookup, let entry = cache.cachedResponse(for: request) else {
                if cacheOnly {
                    complete(task, outcome: TransferOutcome(error: .resourceNotCached, request: request))
                } else {
                    task.setCacheContext(CacheContext(entry: nil, revalidates: false, requestDate: now))
                    submitStart(task)
                }
                return
            }
            let pragmaNoCache = request.value(forHTTPHeaderField: "Pragma")?.lowercased().contains("no-cache") ?? false
            switch CacheFreshness.decide(
                entry: entry, policy: policy, requestDirectives: directives, pragmaNoCache: pragmaNoCache, now: now)
            {
            case .useCached:
                let head = entry.head
                task.didReceive(head: head)
                task.didReceiveBodyBytes(Int64(entry.body.count))
                complete(task, outcome: TransferOutcome(error: nil, request: request, head: head, body: entry.body))
            case .revalidate:
                let callerValidates = request.value(forHTTPHeaderField: "If-None-Match") != nil
                    || request.value(forHTTPHeaderField: "If-Modified-Since") != nil
                if !callerValidates { task.addHeaderLines(CacheFreshness.conditionalHeaderLines(for: entry)) }
                task.setCacheContext(CacheContext(entry: entry, revalidates: !callerValidates, requestDate: now))
                submitStart(task)
            case .fetch:
                task.setCacheContext(CacheContext(entry: entry, revalidates: false, requestDate: now))
                submitStart(task)
            }
        }
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

    func applyCache(_ cache: ResponseCache, to task: SessionTask, outcome: TransferOutcome) -> TransferOutcome {
        guard outcome.error == nil, let head = outcome.head, let original = task.originalRequest,
            let context = task.takeCacheContext()
        else { return outcome }
        let request = sentFields(of: original)
        let now = Date()
        if head.statusCode == 304, context.revalidates, let entry = context.entry {
            let refreshed = CacheFreshness.refreshed(entry, with: head, requestDate: context.requestDate, now: now)
            cache.storeCachedResponse(refreshed, for: request)
            return outcome.with(head: refreshed.head, body: refreshed.body)
        }
        if head.statusCode == 304 {
            // The caller's own validation: its 304 is its answer; the entry is freshened.
            if let entry = context.entry {
                cache.storeCachedResponse(
                    CacheFreshness.refreshed(entry, with: head, requestDate: context.requestDate, now: now), for: request)
            }
            return outcome
        }
        // Stored under the URL asked for only when no redirect intervened.
        guard let body = outcome.body, outcome.request?.url == original.url else { return outcome }
        let requestDate = context.requestDate
        do {
            let responseDirectives = CacheFreshness.directives(head.value(forHTTPHeaderField: "Cache-Control"))
            let requestDirectives = CacheFreshness.directives(request.value(forHTTPHeaderField: "Cache-Control"))
            let vary = head.value(forHTTPHeaderField: "Vary")
            if configuration.httpShouldSetCookies,
                vary?.lowercased().split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "cookie" }) == true
            {
                // The Cookie field comes from the jar, which changes under the cache: a
                // response that varies on it is never answered from the cache.
                cache.removeCachedResponse(for: request)
                return outcome
            }
            let explicit = CacheFreshness.hasExplicitFreshness(
                responseDirectives, expires: head.value(forHTTPHeaderField: "Expires"))
            guard CacheFreshness.isStorable(
                statusCode: head.statusCode, response: responseDirectives, request: requestDirectives, vary: vary,
                hasExplicitFreshness: explicit)
            else {
                cache.removeCachedResponse(for: request)
                return outcome
            }
            var varying: [String: String?] = [:]
            for name in vary?.split(separator: ",") ?? [] {
                let field = name.trimmingCharacters(in: .whitespaces).lowercased()
                if !field.isEmpty { varying[field] = request.value(forHTTPHeaderField: field) }
            }
            let entry = CachedResponse(
                url: head.url, statusCode: head.statusCode, httpVersion: head.httpVersion,
                fields: head.fields.map { CachedResponse.Field(name: $0.name, value: $0.value) }, body: body,
                requestDate: requestDate, responseDate: now, varyingRequestFields: varying)
            if CacheFreshness.lifetime(of: entry) > 0 || CacheFreshness.hasValidator(entry) {
                cache.storeCachedResponse(entry, for: request)
            }
        }
        return outcome
    }
}
