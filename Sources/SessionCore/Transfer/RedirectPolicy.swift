import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How Curlew follows redirects itself (curl's `FOLLOWLOCATION` stays off, so the
/// redirection hook can change or refuse each hop).
enum RedirectPolicy {
    /// Headers that carry credentials: never sent to another origin.
    static let credentialHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    static func isRedirect(_ response: HTTPResponseHead) -> Bool {
        [301, 302, 303, 307, 308].contains(response.statusCode) && response.contains("Location")
    }

    /// The next hop of a redirect: the request and whether it carries the body again.
    struct Hop: Equatable {
        var request: URLRequest
        /// 307/308 (and 301/302 for methods other than POST) send the same body again; the
        /// body may live outside the `URLRequest` (a file upload), so this says so explicitly.
        var keepsBody: Bool
    }

    /// The request a browser would send next, or nil when the redirect cannot be followed
    /// (no usable Location, a scheme other than http/https).
    static func redirectedRequest(from request: URLRequest, response: HTTPResponseHead) -> URLRequest? {
        nextHop(from: request, response: response)?.request
    }

    /// The next hop (see `redirectedRequest(from:response:)`), with its body rule.
    static func nextHop(from request: URLRequest, response: HTTPResponseHead) -> Hop? {
        guard isRedirect(response), let location = response.value(forHTTPHeaderField: "Location"),
            let base = request.url,
            let resolved = URL(string: location, relativeTo: base)?.absoluteURL,
            let scheme = resolved.scheme?.lowercased(), PreparedRequest.supportedSchemes.contains(scheme)
        else { return nil }
        // RFC 3986 §5.2.2 removes dot segments from every resolved reference, an absolute
        // `Location` too (Foundation does it only for a relative one): paths go out as given
        // since libcurl no longer removes them (`CurlURL`).
        let target = resolved.path.contains("/.") ? resolved.standardized : resolved

        var next = request
        next.url = target
        let method = request.httpMethod ?? "GET"
        // RFC 9110 §15.4: 303 always becomes GET (HEAD stays HEAD); 301/302 turn POST into GET
        // as every browser does; 307/308 keep method and body.
        let becomesGet = (response.statusCode == 303 && method != "HEAD")
            || ([301, 302].contains(response.statusCode) && method == "POST")
        if becomesGet {
            next.httpMethod = "GET"
            next.httpBody = nil
            next.httpBodyStream = nil
            for name in ["Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding"] {
                next.setValue(nil, forHTTPHeaderField: name)
            }
        }
        if !isSameOrigin(base, target) {
            next = withoutCredentials(next)
            // A caller's `Host` names the first origin. Sent on, it would ask the next server for
            // the first one's site, and libcurl would give it the jar's cookies of the host the
            // field names (its `cookiehost`). curl sends a custom `Host` to its first host only,
            // but each hop here is a transfer of its own: the field names the hop's own
            // authority instead, which is what libcurl would send, and which also replaces the
            // name libcurl before 8.20 keeps on the handle (`CurlRuntime.keepsCookieHost`).
            for (name, _) in next.allHTTPHeaderFields ?? [:] where name.lowercased() == "host" {
                next.setValue(nil, forHTTPHeaderField: name)
                next.setValue(authority(of: target), forHTTPHeaderField: "Host")
            }
        }
        return Hop(request: next, keepsBody: !becomesGet)
    }

    /// What the redirection hook returned (`decision`) for the `proposed` hop of a redirect
    /// answered to `previous`, with what the hook did not choose made right when it moved the
    /// hop to another origin than the proposed one. The credential fields it passed on as it
    /// got them (the previous origin's `Authorization` of a hop proposed on the same origin)
    /// never reach a third origin, and a `Host` field it left as it was names the hop's own
    /// authority: libcurl would otherwise send the old name, and pick and file the jar's
    /// cookies under it. A credential the hook set itself stays, as on any hop it chose.
    static func hookDecision(_ decision: URLRequest, proposed: URLRequest, previous: URLRequest) -> URLRequest {
        // The usual hop (no hook, or one that kept the proposed URL) is left at a string
        // comparison: no host is parsed out on the driver thread for it.
        guard let to = decision.url, let proposedURL = proposed.url, to != proposedURL, !isSameOrigin(proposedURL, to)
        else { return decision }
        var result = decision
        // The URL's own credentials too: a relative `Location` keeps the first URL's
        // `user:password@`, and a hook that changed only the host kept them for libcurl to send.
        if let from = previous.url, !isSameOrigin(from, to), to.user != nil || to.password != nil,
            to.user == proposedURL.user, to.password == proposedURL.password,
            var components = URLComponents(url: to, resolvingAgainstBaseURL: false)
        {
            components.user = nil
            components.password = nil
            result.url = components.url ?? to
        }
        for (name, value) in decision.allHTTPHeaderFields ?? [:] {
            let lowered = name.lowercased()
            guard value == proposed.value(forHTTPHeaderField: name) else { continue }
            if lowered == "host" {
                result.setValue(nil, forHTTPHeaderField: name)
                result.setValue(authority(of: to), forHTTPHeaderField: "Host")
            } else if credentialHeaders.contains(lowered), let from = previous.url, !isSameOrigin(from, to) {
                result.setValue(nil, forHTTPHeaderField: name)
            }
        }
        return result
    }

    /// `adapted` with the credential fields `hop` had: what an adapter added, changed or
    /// removed there is undone. For a retry of a hop a redirect took to another origin, where
    /// adapters written for the first origin (a bearer token, a session cookie) run again:
    /// credentials never follow a request to another origin, whoever adds them, while a
    /// credential the redirection hook chose for the hop stays.
    static func keepingCredentials(of hop: URLRequest, in adapted: URLRequest) -> URLRequest {
        var result = withoutCredentials(adapted)
        for (name, value) in hop.allHTTPHeaderFields ?? [:] where credentialHeaders.contains(name.lowercased()) {
            result.setValue(value, forHTTPHeaderField: name)
        }
        return result
    }

    /// `request` without its `credentialHeaders`, whatever their case.
    static func withoutCredentials(_ request: URLRequest) -> URLRequest {
        var result = request
        for (name, _) in request.allHTTPHeaderFields ?? [:] where credentialHeaders.contains(name.lowercased()) {
            result.setValue(nil, forHTTPHeaderField: name)
        }
        return result
    }

    /// The `Host` field for `url` (RFC 9110 §7.2): its host, bracketed when an IPv6 address,
    /// and its port unless the scheme's default.
    static func authority(of url: URL) -> String {
        let host = url.host ?? ""
        let name = host.contains(":") && !host.hasPrefix("[") ? "[" + host + "]" : host
        let port = URLOrigin.port(of: url)
        let defaultPort = url.scheme?.lowercased() == "https" ? 443 : 80
        return port == defaultPort ? name : name + ":" + String(port)
    }

    /// Same scheme, host and port (default ports made explicit).
    static func isSameOrigin(_ lhs: URL, _ rhs: URL) -> Bool {
        lhs.scheme?.lowercased() == rhs.scheme?.lowercased()
            && lhs.host?.lowercased() == rhs.host?.lowercased()
            && URLOrigin.port(of: lhs) == URLOrigin.port(of: rhs)
    }
}
