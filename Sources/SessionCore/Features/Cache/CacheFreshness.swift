import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// RFC 9111's rules, as a private (single-user) cache applies them: what may be stored, how
/// long it stays fresh, and what a request asks of the cache. Pure functions of headers and
/// clocks, so every rule is tested on its own.
enum CacheFreshness {
    /// Heuristic freshness is capped at a day (RFC 9111 §4.2.2 leaves the bound to the cache).
    static let heuristicCap: TimeInterval = 24 * 3600
    /// Statuses cacheable without explicit freshness (RFC 9110 §15.1).
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 404, 405, 410, 414, 501]

    /// The `Cache-Control` directives of a value: lower-cased names, values without quotes.
    static func directives(_ value: String?) -> [String: String] {
        guard let value else { return [:] }
        var result: [String: String] = [:]
        for part in value.split(separator: ",") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            guard let name = pieces.first?.trimmingCharacters(in: .whitespaces).lowercased(), !name.isEmpty else { continue }
            let raw = pieces.count > 1 ? pieces[1].trimmingCharacters(in: .whitespaces) : ""
            result[name] = raw.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
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

    /// How long the response stays fresh from when it was generated.
    static func lifetime(of entry: CachedResponse) -> TimeInterval {
        let response = directives(entry.value(forHTTPHeaderField: "Cache-Control"))
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
        pragmaNoCache: Bool, now: Date
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
        var fresh = !mustValidate && age < lifetime(of: entry)
        if fresh, let maxAge = seconds(request["max-age"]) { fresh = age <= maxAge }
        if fresh, let minFresh = seconds(request["min-fresh"]) { fresh = lifetime(of: entry) - age >= minFresh }
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
