import Foundation

extension CookieJar {
    /// The unexpired cookies libcurl's engine would send to `url`, in the order it would send
    /// them: what `SessionTask.curlDescription(showingSecrets:)` writes as `-b`.
    ///
    /// libcurl has no way to ask this short of sending a request, so the rules of libcurl
    /// 7.88's `Curl_cookie_getlist` (lib/cookie.c) are repeated here, for descriptions only
    /// (transfers never use this): the host equals a host-only cookie's domain, or ends with
    /// `.domain` for a domain cookie (never for an IP address); the request path is under the
    /// cookie's path (`pathmatch`); a `Secure` cookie needs https or a local host (`localhost`,
    /// `127.0.0.1`, `::1`). libcurl orders by longer path, then longer domain, then longer
    /// name, then creation time, which the jar does not expose: equal lengths fall back to the
    /// jar's order (domain, path, name).
    func cookies(matching url: URL) -> [Cookie] {
        guard let rawHost = url.host, !rawHost.isEmpty else { return [] }
        var host = rawHost.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.hasSuffix(".") { host.removeLast() }  // libcurl strips one trailing dot
        let isIP = Self.isIPAddress(host)
        let scheme = url.scheme?.lowercased() ?? ""
        let secureContext = scheme == "https" || host == "localhost" || host == "127.0.0.1" || host == "::1"
        let path = URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? url.path

        let matching = cookies.filter { cookie in
            if cookie.isSecure && !secureContext { return false }
            let domainMatches: Bool
            if cookie.includesSubdomains && !isIP {
                domainMatches = host == cookie.domain || host.hasSuffix("." + cookie.domain)
            } else {
                domainMatches = host == cookie.domain
            }
            return domainMatches && Self.pathMatches(cookiePath: cookie.path, requestPath: path)
        }
        // A stable sort: `cookies` is already ordered by domain, path and name.
        return matching.enumerated().sorted { lhs, rhs in
            let (a, b) = (lhs.element, rhs.element)
            if a.path.utf8.count != b.path.utf8.count { return a.path.utf8.count > b.path.utf8.count }
            if a.domain.utf8.count != b.domain.utf8.count { return a.domain.utf8.count > b.domain.utf8.count }
            if a.name.utf8.count != b.name.utf8.count { return a.name.utf8.count > b.name.utf8.count }
            return lhs.offset < rhs.offset
        }.map(\.element)
    }

    /// libcurl's `pathmatch`: the cookie's path without its trailing `/` is a prefix of the
    /// request path ending at the end or at a `/`; `/` matches every path.
    static func pathMatches(cookiePath: String, requestPath: String) -> Bool {
        var cookiePath = Substring(cookiePath)
        if cookiePath.count > 1, cookiePath.hasSuffix("/") { cookiePath.removeLast() }  // sanitize_cookie_path
        if cookiePath.utf8.count <= 1 { return true }
        let requestPath = requestPath.isEmpty || !requestPath.hasPrefix("/") ? "/" : requestPath
        let cookieBytes = Array(cookiePath.utf8)
        let requestBytes = Array(requestPath.utf8)
        guard requestBytes.count >= cookieBytes.count, requestBytes.starts(with: cookieBytes) else { return false }
        return requestBytes.count == cookieBytes.count || requestBytes[cookieBytes.count] == UInt8(ascii: "/")
    }

    /// Whether `host` is an IPv4 or IPv6 literal (libcurl never matches those by domain tail).
    private static func isIPAddress(_ host: String) -> Bool {
        if host.contains(":") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCII) && UInt8($0) != nil }
    }
}
