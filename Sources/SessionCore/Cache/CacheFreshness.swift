import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// RFC 9111's rules: what may be stored, how long it stays fresh (for a shared cache too:
/// `s-maxage`), what a request asks of the cache, and which entry a 304 updates. Pure functions
/// of headers and clocks, so every rule is tested on its own. Who may reuse an entry is
/// `CacheScope`'s and `CacheIdentity`'s part.
enum CacheFreshness {
    /// Heuristic freshness is capped at a day (RFC 9111 §4.2.2 leaves the bound to the cache).
    static let heuristicCap: TimeInterval = 24 * 3600
    /// Statuses cacheable without explicit freshness (RFC 9110 §15.1).
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 404, 405, 410, 414, 501]

    /// The `Cache-Control` directives of a value: lower-cased names, values without quotes.
    /// A directive given twice keeps its first value, and a freshness directive given twice
    /// with different values counts as `0` (RFC 9111 §4.2.1: such a response is stale): the
    /// fields `max-age=0` and `max-age=86400` (joined into one value) made it fresh for a day.
    static func directives(_ value: String?) -> [String: String] {
        guard let value else { return [:] }
        var result: [String: String] = [:]
        for part in value.split(separator: ",") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            guard let name = pieces.first?.trimmingCharacters(in: .whitespaces).lowercased(), !name.isEmpty else { continue }
            let raw = pieces.count > 1 ? pieces[1].trimmingCharacters(in: .whitespaces) : ""
            let given = raw.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            guard let earlier = result[name] else {
                result[name] = given
                continue
            }
            if earlier != given, name == "max-age" || name == "s-maxage" { result[name] = "0" }
        }
        return result
    }

    /// Seconds in a delta-seconds directive value; nil when absent or not a number (a huge
    /// value saturates rather than overflowing).
    static func seconds(_ value: String?) -> TimeInterval? {
        guard let value, !value.isEmpty, value.allSatisfy(\.isASCIIDigit) else { return nil }
        return TimeInterval(value) ?? .greatestFiniteMagnitude
    }

    /// Whether a response to a GET may be stored (RFC 9111 §3), given both directive sets.
    /// Partial content (206), 304 and redirects (a redirect reaching the task is one the
    /// manager did not follow) are never stored: the entry must be a whole, final response.
    static func isStorable(
        statusCode: Int, response: [String: String], request: [String: String], vary: String?,
        hasExplicitFreshness: Bool
    ) -> Bool {
        guard statusCode != 206, statusCode != 304, !(300..<400).contains(statusCode) else { return false }
        guard response["no-store"] == nil, request["no-store"] == nil else { return false }
        guard !(vary?.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == "*" } ?? false) else {
            return false
        }
        return heuristicallyCacheable.contains(statusCode) || hasExplicitFreshness
    }

    /// How long the response stays fresh from when it was generated; a shared cache takes
    /// `s-maxage` first (RFC 9111 §5.2.2.10).
    static func lifetime(of entry: CachedResponse, shared: Bool = false) -> TimeInterval {
        let response = directives(entry.value(forHTTPHeaderField: "Cache-Control"))
        if shared, let sharedMaxAge = seconds(response["s-maxage"]) { return sharedMaxAge }
        if let maxAge = seconds(response["max-age"]) { return maxAge }
        let date = entry.value(forHTTPHeaderField: "Date").flatMap(HTTPDate.parse) ?? entry.responseDate
        if let expires = entry.value(forHTTPHeaderField: "Expires") {
            // An invalid date (often "0") means already expired (RFC 9111 §5.3).
            guard let expiry = HTTPDate.parse(expires) else { return 0 }
            return max(0, expiry.timeIntervalSince(date))
        }
        if heuristicallyCacheable.contains(entry.statusCode),
            let lastModified = entry.value(forHTTPHeaderField: "Last-Modified").flatMap(HTTPDate.parse)
        {
            return min(heuristicCap, max(0, date.timeIntervalSince(lastModified) / 10))
        }
        return 0
    }

    /// Whether the response carries freshness of its own (max-age or Expires).
    static func hasExplicitFreshness(_ response: [String: String], expires: String?) -> Bool {
        response["max-age"] != nil || expires != nil
    }

    /// The entry's current age (RFC 9111 §4.2.3).
    static func age(of entry: CachedResponse, now: Date) -> TimeInterval {
        let ageValue = seconds(entry.value(forHTTPHeaderField: "Age")) ?? 0
        let date = entry.value(forHTTPHeaderField: "Date").flatMap(HTTPDate.parse) ?? entry.responseDate
        let apparent = max(0, entry.responseDate.timeIntervalSince(date))
        let delay = max(0, entry.responseDate.timeIntervalSince(entry.requestDate))
        let initial = max(apparent, ageValue + delay)
        return initial + max(0, now.timeIntervalSince(entry.responseDate))
    }

    /// What the cache does for a request, given the entry it holds.
    enum Decision: Equatable {
        /// Answer from the cache, without the network.
        case useCached
        /// Ask the server whether the entry still holds (If-None-Match / If-Modified-Since).
        case revalidate
        /// Send the request as is.
        case fetch
    }

    /// Decides between the entry and the network under the request's cache policy and
    /// `Cache-Control` (RFC 9111 §4, `URLRequest.CachePolicy`).
    static func decide(
        entry: CachedResponse, policy: URLRequest.CachePolicy, requestDirectives request: [String: String],
        pragmaNoCache: Bool, now: Date, shared: Bool = false
    ) -> Decision {
        switch policy {
        case .returnCacheDataElseLoad, .returnCacheDataDontLoad:
            return .useCached  // stale or not, as URLSession does
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData:
            return .fetch
        case .reloadRevalidatingCacheData:
            return hasValidator(entry) ? .revalidate : .fetch
        default:
            break
        }
        if request["only-if-cached"] != nil { return .useCached }
        let response = directives(entry.value(forHTTPHeaderField: "Cache-Control"))
        let mustValidate = request["no-cache"] != nil || pragmaNoCache || response["no-cache"] != nil
        let age = age(of: entry, now: now)
        let lifetime = lifetime(of: entry, shared: shared)
        var fresh = !mustValidate && age < lifetime
        if fresh, let maxAge = seconds(request["max-age"]) { fresh = age <= maxAge }
        if fresh, let minFresh = seconds(request["min-fresh"]) { fresh = lifetime - age >= minFresh }
        if fresh { return .useCached }
        return hasValidator(entry) ? .revalidate : .fetch
    }

    static func hasValidator(_ entry: CachedResponse) -> Bool {
        entry.value(forHTTPHeaderField: "ETag") != nil || entry.value(forHTTPHeaderField: "Last-Modified") != nil
    }

    /// The conditional header lines that revalidate `entry`.
    static func conditionalHeaderLines(for entry: CachedResponse) -> [String] {
        var lines: [String] = []
        if let tag = entry.value(forHTTPHeaderField: "ETag") { lines.append("If-None-Match: \(tag)") }
        if let date = entry.value(forHTTPHeaderField: "Last-Modified") { lines.append("If-Modified-Since: \(date)") }
        return lines
    }

    /// Whether a 304 answers for `entry` (RFC 9111 §4.3.4), so that its fields may update it.
    ///
    /// - The request must have carried the entry's validators: its `If-None-Match` lists the
    ///   entry's `ETag` (weak comparison), or, without `If-None-Match`, its `If-Modified-Since`
    ///   is the entry's `Last-Modified`. A caller's own `If-None-Match: "2"` answered 304 says
    ///   nothing about a stored "1". `callerRequest` nil: Curlew sent the entry's validators.
    /// - The 304's own validators, when it sends any, must be the entry's: a 304 naming
    ///   another `ETag` or `Last-Modified` describes another representation.
    static func notModified(_ head: HTTPResponseHead, describes entry: CachedResponse, callerRequest request: URLRequest?)
        -> Bool
    {
        let storedTag = entry.value(forHTTPHeaderField: "ETag")
        let storedDate = entry.value(forHTTPHeaderField: "Last-Modified").flatMap(HTTPDate.parse)
        if let request, let condition = request.value(forHTTPHeaderField: "If-None-Match") {
            guard let storedTag else { return false }
            let listed = condition.split(separator: ",").map { opaqueTag(String($0)) }
            guard listed.contains(opaqueTag(storedTag)) else { return false }
        } else if let request, let condition = request.value(forHTTPHeaderField: "If-Modified-Since") {
            guard let storedDate, HTTPDate.parse(condition) == storedDate else { return false }
        } else if request != nil {
            return false
        }
        if let tag = head.value(forHTTPHeaderField: "ETag"), opaqueTag(tag) != storedTag.map(opaqueTag) { return false }
        if let date = head.value(forHTTPHeaderField: "Last-Modified"), HTTPDate.parse(date) != storedDate { return false }
        return true
    }

    /// An entity tag without its weakness prefix and surrounding space (weak comparison,
    /// RFC 9110 §8.8.3.2).
    private static func opaqueTag(_ tag: String) -> String {
        let trimmed = tag.trimmingCharacters(in: .whitespaces)
        return trimmed.hasPrefix("W/") ? String(trimmed.dropFirst(2)) : trimmed
    }

    /// Whether a caller's own conditional request is answered 304 by a fresh `entry` (RFC 9111
    /// §4.3.2, RFC 9110 §13.1): its `If-None-Match` lists the entry's `ETag` (weak comparison)
    /// or is `*`; without `If-None-Match`, its `If-Modified-Since` is no earlier than the
    /// entry's `Last-Modified` (else its `Date`) and not later than now. False when the request
    /// has neither, the entry has nothing to compare with, or the stored response is no 2xx:
    /// the stored response answers whole then, as it would from the server.
    static func satisfiesCallersCondition(_ request: URLRequest, entry: CachedResponse, now: Date) -> Bool {
        // Preconditions apply only where the answer would be a 2xx (RFC 9110 §13.2.1): a stored
        // 404 or 410 answers as itself, whatever the caller's validators.
        guard (200..<300).contains(entry.statusCode) else { return false }
        if let condition = request.value(forHTTPHeaderField: "If-None-Match") {
            let listed = condition.split(separator: ",").map { opaqueTag(String($0)) }
            if listed.contains("*") { return true }
            guard let storedTag = entry.value(forHTTPHeaderField: "ETag") else { return false }
            return listed.contains(opaqueTag(storedTag))
        }
        // A date later than now is no valid condition (§13.1.3): ignored.
        guard let condition = request.value(forHTTPHeaderField: "If-Modified-Since").flatMap(HTTPDate.parse),
            condition <= now,
            let stored = (entry.value(forHTTPHeaderField: "Last-Modified") ?? entry.value(forHTTPHeaderField: "Date"))
                .flatMap(HTTPDate.parse)
        else { return false }
        return stored <= condition
    }

    /// The 304 a fresh `entry` answers a caller's satisfied condition with: the stored
    /// response's fields without those that describe a body (RFC 9110 §15.4.5), and no body.
    static func notModifiedHead(for entry: CachedResponse) -> HTTPResponseHead {
        let fields = entry.fields.filter { field in
            let name = field.name.lowercased()
            return name == "content-location" || (!name.hasPrefix("content-") && name != "transfer-encoding")
        }
        return HTTPResponseHead(
            url: entry.url, statusCode: 304, httpVersion: entry.httpVersion, fields: fields.map { ($0.name, $0.value) })
    }

    /// `entry` with a 304's fields applied (RFC 9111 §4.3.4): fields the 304 sends replace
    /// the stored ones, except those describing the stored body.
    static func refreshed(_ entry: CachedResponse, with notModified: HTTPResponseHead, requestDate: Date, now: Date)
        -> CachedResponse
    {
        var updated = entry
        let keep: Set<String> = ["content-length", "content-encoding", "transfer-encoding", "content-range"]
        let incoming = notModified.fields.filter { !keep.contains($0.name.lowercased()) }
        let replaced = Set(incoming.map { $0.name.lowercased() })
        updated.fields = entry.fields.filter { !replaced.contains($0.name.lowercased()) }
            + incoming.map { CachedResponse.Field(name: $0.name, value: $0.value) }
        updated.requestDate = requestDate
        updated.responseDate = now
        return updated
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
