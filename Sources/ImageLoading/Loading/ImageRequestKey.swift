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
    /// request is answered by the HTTP layer, never from the image cache. Another
    /// `Cache-Control` (a `max-stale`, say) leaves the image cache in use.
    static func asksPastTheImageCache(_ request: URLRequest) -> Bool {
        for name in answerChangingFields where name != "Cache-Control" && name != "Pragma" {
            if request.value(forHTTPHeaderField: name) != nil { return true }
        }
        return hasDirective(in: request) { $0 == "no-cache" || $0 == "no-store" || $0 == "max-age=0" }
    }

    /// Whether what `request` fetched stays out of the image cache: the answer to a range (a
    /// part of an image, or one chosen by `If-Range`) or to a request that said `no-store`.
    /// A refresh's whole image (`no-cache`, a condition answered with a 200) is stored,
    /// replacing the older one.
    static func keepsItsAnswerOutOfTheImageCache(_ request: URLRequest) -> Bool {
        request.value(forHTTPHeaderField: "Range") != nil || request.value(forHTTPHeaderField: "If-Range") != nil
            || hasDirective(in: request) { $0 == "no-store" }
    }

    /// Whether a directive of the request's `Cache-Control` or `Pragma` matches, each
    /// lowercased and trimmed; `max-age` reads as `max-age=0` for any zero value (`"0"`, `00`).
    private static func hasDirective(in request: URLRequest, _ matches: (String) -> Bool) -> Bool {
        for name in ["Cache-Control", "Pragma"] {
            guard let value = request.value(forHTTPHeaderField: name) else { continue }
            for directive in value.lowercased().split(separator: ",") {
                var token = directive.trimmingCharacters(in: .whitespaces)
                if token.hasPrefix("max-age="),
                    let seconds = Int(token.dropFirst("max-age=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
                {
                    token = "max-age=\(seconds)"
                }
                if matches(token) { return true }
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
