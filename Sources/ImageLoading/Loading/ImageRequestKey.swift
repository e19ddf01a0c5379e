import Foundation
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What tells image requests apart: the URL as the caller gave it and, when the request
/// carries credentials of its own, their name (`URLRequest.credentialsDigest`). Two requests
/// share a download, a binding's load or a cache entry only when both match, so one user's
/// image never answers another user's request for the same URL; a request without
/// credentials is keyed by its URL alone, as AFNetworking keys it.
enum ImageRequestKey {
    /// The key of `request`, whose URL is `url`.
    static func key(for request: URLRequest, url: URL) -> String {
        url.absoluteString + suffix(for: request)
    }

    /// The key the downloader merges transfers under: ``key(for:url:)``, the kind of the
    /// request's cache policy, and the request's own fields that the HTTP cache or the server
    /// answer differently. A request that may load never joins one that may only read the HTTP
    /// cache (whose failure, `resourceNotCached`, is no answer to it); a reload never joins a
    /// transfer the cache may answer with what it stored; a cache-first request
    /// (`.returnCacheDataElseLoad`, which takes a stored image however old) never joins a
    /// revalidation, nor the other way round; a conditional or range request (a 304 or a 206
    /// is its answer, no image) and one with cache directives of its own join only their like.
    static func mergeKey(for request: URLRequest, url: URL) -> String {
        var key = key(for: request, url: url)
        switch request.cachePolicy {
        case .returnCacheDataDontLoad: key += " cache-only"
        case .returnCacheDataElseLoad: key += " cache-first"
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData, .reloadRevalidatingCacheData:
            key += " reload"
        default: break
        }
        for name in answerChangingFields {
            // A line break, which no field value holds, so that two fields never read as one.
            if let value = request.value(forHTTPHeaderField: name) { key += "\n\(name)=\(value)" }
        }
        return key
    }

    /// Whether `request` shapes its own answer past the image cache: a range, a condition
    /// (`If-None-Match`, `If-Modified-Since`, ...), or a directive that asks the origin
    /// (`Cache-Control: no-cache`, `no-store` or `max-age=0`, `Pragma: no-cache`). Such a
    /// request is answered by the HTTP layer, never from the image cache, and what it fetched
    /// is not stored there (a range's image is part of one; a conditional answer is the
    /// caller's). Another `Cache-Control` (a `max-stale`, say) leaves the image cache in use.
    static func asksPastTheImageCache(_ request: URLRequest) -> Bool {
        for name in answerChangingFields where name != "Cache-Control" && name != "Pragma" {
            if request.value(forHTTPHeaderField: name) != nil { return true }
        }
        let directives = [request.value(forHTTPHeaderField: "Cache-Control"), request.value(forHTTPHeaderField: "Pragma")]
        for value in directives.compactMap({ $0 }) {
            for directive in value.lowercased().split(separator: ",") {
                let token = directive.trimmingCharacters(in: .whitespaces)
                if token == "no-cache" || token == "no-store" || token == "max-age=0" { return true }
            }
        }
        return false
    }

    /// Request fields that change what the HTTP cache or the server answers.
    private static let answerChangingFields = [
        "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range", "Cache-Control", "Pragma",
    ]

    /// The URL part of `key` (everything before the credentials' name, if any).
    static func url(of key: String) -> Substring {
        key.prefix { $0 != " " }
    }

    /// What follows the URL (and a cache's additional identifier) for a request with
    /// credentials: a space (never in an absolute URL) and their name; empty without.
    static func suffix(for request: URLRequest) -> String {
        request.credentialsDigest.map { " credentials:" + $0 } ?? ""
    }
}
