import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore

/// The headers a `--session` gave a run from its file, and the origin they were kept for.
///
/// A session's headers belong to one origin (`SessionStore`): a run sends them only to that
/// origin, and so must every hop of a `--follow` chain. Curlew's redirect policy keeps
/// `Authorization`, `Cookie` and `Proxy-Authorization` off another origin; a session header
/// of another name (`X-Api-Key: …`) would follow the chain wherever it went. Headers typed on
/// this run's command line are not in the scope: they follow a redirect as curl's `-H`
/// headers do.
struct SessionHeaderScope: Sendable {
    /// `scheme://host:port` the headers were kept for (`SessionStore.origin(of:)`).
    let origin: String
    /// The header names the session file supplied (lowercased).
    let names: Set<String>

    /// The scope of `stored`, loaded for `url`, less the names `typed` on the command line;
    /// nil when nothing of the session's is left to keep in place.
    init?(stored: [String: String], url: URL, typed: [String]) {
        guard let origin = SessionStore.origin(of: url) else { return nil }
        let overridden = Set(typed.map { $0.lowercased() })
        let names = Set(stored.keys.map { $0.lowercased() }).subtracting(overridden)
        guard !names.isEmpty else { return nil }
        self.origin = origin
        self.names = names
    }

    /// `request` as a redirect hop may send it: without the session's headers when the hop
    /// leaves their origin. Once removed they stay removed for the rest of the chain (each
    /// hop starts from the one before), also back at their origin, as Curlew's own
    /// credentials do.
    func hop(_ request: URLRequest) -> URLRequest {
        guard let url = request.url, SessionStore.origin(of: url) != origin else { return request }
        var hop = request
        for name in (request.allHTTPHeaderFields ?? [:]).keys where names.contains(name.lowercased()) {
            hop.setValue(nil, forHTTPHeaderField: name)
        }
        return hop
    }
}
