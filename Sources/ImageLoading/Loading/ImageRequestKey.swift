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

    /// The key the downloader merges transfers under: ``key(for:url:)``, and for a request
    /// whose cache policy must not share another's transfer, that policy's kind. A request
    /// that may load never joins one that may only read the HTTP cache (whose failure,
    /// `resourceNotCached`, is no answer to it), and a reload never joins a transfer the HTTP
    /// cache may answer with what it stored; the other policies load alike.
    static func mergeKey(for request: URLRequest, url: URL) -> String {
        let key = key(for: request, url: url)
        switch request.cachePolicy {
        case .returnCacheDataDontLoad: return key + " cache-only"
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData, .reloadRevalidatingCacheData:
            return key + " reload"
        default: return key
        }
    }

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
