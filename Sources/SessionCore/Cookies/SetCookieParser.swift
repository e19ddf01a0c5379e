import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Turns a `Set-Cookie` value received from a URL into the ``Cookie`` libcurl's engine would
/// store for it (RFC 6265 §5.2–5.3 with libcurl's choices), refusing what libcurl refuses:
/// a `Domain` the host is not in, a public suffix, `Secure` from an insecure origin.
///
/// libcurl applies these checks only to headers of its own transfers; its
/// `CURLOPT_COOKIELIST "Set-Cookie:"` entry point takes no URL and checks none of them (and
/// would store a cookie without a `Domain` for every host). So a `Set-Cookie` line a caller
/// hands to the jar is parsed here and stored as a Netscape line with explicit fields.
enum SetCookieParser {
    /// Whether a response from `host` over `scheme` may set or overlay a `Secure` cookie:
    /// https, or a loopback name libcurl also counts as secure.
    static func isSecureContext(scheme: String, host: String) -> Bool {
        scheme == "https" || host == "localhost" || host == "127.0.0.1" || host == "::1"
    }

    /// Whether `url` is such an origin (see `isSecureContext(scheme:host:)`).
    static func isSecureContext(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), var host = url.host?.lowercased() else { return false }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return isSecureContext(scheme: scheme, host: host)
    }

    /// RFC 6265bis §5.7 ("Strict Secure"): a cookie that is not `Secure`, from an origin that is
    /// not secure, may not overlay a `Secure` one of the same name whose domain matches its own
    /// (either way) and whose path its path is under. libcurl's engine refuses it so; a cookie
    /// stored beside a caller's `Cookie` header, or through `add(setCookie:for:)`, did not: a
    /// plain-http answer replaced the session cookie https requests then sent.
    static func overlaysSecureCookie(_ cookie: Cookie, in stored: [Cookie]) -> Bool {
        func domainMatches(_ domain: String, _ other: String) -> Bool { domain == other || domain.hasSuffix("." + other) }
        func pathMatches(_ path: String, _ cookiePath: String) -> Bool {
            path == cookiePath || (path.hasPrefix(cookiePath) && (cookiePath.hasSuffix("/") || path.dropFirst(cookiePath.count).first == "/"))
        }
        return stored.contains { existing in
            existing.isSecure && existing.name == cookie.name
                && (domainMatches(cookie.domain, existing.domain) || domainMatches(existing.domain, cookie.domain))
                && pathMatches(cookie.path, existing.path)
        }
    }

    static func cookie(from header: String, for url: URL, now: Date = Date()) throws(CookieJarError) -> Cookie {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw .invalidURL("'\(url.absoluteString)' is not an http or https URL")
        }
        guard var host = url.host?.lowercased(), !host.isEmpty else {
            throw .invalidURL("'\(url.absoluteString)' has no host")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var text = Substring(header)
        if text.lowercased().hasPrefix("set-cookie:") { text = text.dropFirst("set-cookie:".count) }
        let parts = text.split(separator: ";", omittingEmptySubsequences: false)
        guard let pair = parts.first, let equals = pair.firstIndex(of: "=") else {
            throw .rejected("no name=value pair in \(header.debugDescription)")
        }
        let name = trimmed(pair[..<equals])
        let value = trimmed(pair[pair.index(after: equals)...])
        guard !name.isEmpty else { throw .rejected("the cookie name is empty") }

        var attributes = Attributes()
        for part in parts.dropFirst() {
            let key: String
            let argument: String
            if let sign = part.firstIndex(of: "=") {
                key = trimmed(part[..<sign]).lowercased()
                argument = trimmed(part[part.index(after: sign)...])
            } else {
                key = trimmed(part).lowercased()
                argument = ""
            }
            attributes.apply(key: key, argument: argument)
        }

        if attributes.isSecure && !isSecureContext(scheme: scheme, host: host) {
            throw .rejected("'\(name)' is Secure but '\(url.absoluteString)' is not a secure origin")
        }
        var domain = host
        var includesSubdomains = false
        if let requested = attributes.domain {
            if isIPAddress(host) {
                guard requested == host else { throw .rejected("Domain=\(requested) does not match the address \(host)") }
            } else {
                guard host == requested || host.hasSuffix("." + requested) else {
                    throw .rejected("Domain=\(requested) does not contain the host \(host)")
                }
                guard PublicSuffixList.isAcceptable(domain: requested, forHost: host) else {
                    throw .rejected("Domain=\(requested) is a public suffix: \(host) may not set cookies for it")
                }
                domain = requested
                includesSubdomains = true
            }
        }
        let cookie = Cookie(
            name: name, value: value, domain: domain, includesSubdomains: includesSubdomains,
            path: attributes.path ?? defaultPath(of: url), isSecure: attributes.isSecure,
            isHTTPOnly: attributes.isHTTPOnly, expires: attributes.expiry(now: now))
        do {
            try NetscapeCookieFormat.validate(cookie)
        } catch {
            throw .rejected("\(error)")
        }
        return cookie
    }

    /// The attributes after the name=value pair; the last of each kind wins, as in curl.
    private struct Attributes {
        var domain: String?
        var path: String?
        var isSecure = false
        var isHTTPOnly = false
        var maxAge: String?
        var expires: String?

        mutating func apply(key: String, argument: String) {
            switch key {
            case "domain" where !argument.isEmpty:
                let bare = argument.hasPrefix(".") ? String(argument.dropFirst()) : argument
                domain = bare.lowercased()
            case "path":
                // Quotes around it go, as libcurl's `sanitize_cookie_path` drops them: kept, a
                // quoted path fell back to the default path.
                var bare = Substring(argument)
                if bare.first == "\"" { bare = bare.dropFirst() }
                if bare.last == "\"" { bare = bare.dropLast() }
                path = bare.hasPrefix("/") ? String(bare) : nil  // RFC 6265 §5.2.4: else the default path
            case "secure": isSecure = true
            case "httponly": isHTTPOnly = true
            case "max-age": maxAge = argument
            case "expires": expires = argument
            default: break  // unknown attributes are ignored (§5.2)
            }
        }

        /// Max-Age wins over Expires. Max-Age 0, negative or not starting with a digit expires
        /// the cookie; its leading digits are its value (`3600abc` is 3600, `1.5` is 1), as
        /// libcurl reads it (`curlx_strtoofft`), which stores the same header of a response
        /// whose request used its engine: the two paths store the same cookie. An Expires date
        /// curl cannot parse leaves a session cookie.
        func expiry(now: Date) -> Date? {
            if let maxAge {
                var text = Substring(maxAge)
                if text.first == "\"" { text = text.dropFirst() }
                let digits = text.prefix { $0.isASCII && $0.isNumber }
                guard !digits.isEmpty else { return Date(timeIntervalSince1970: 1) }
                // An overflowing run of digits means "far future".
                guard let seconds = Int64(digits) else { return Date(timeIntervalSince1970: 9.0e18) }
                guard seconds > 0 else { return Date(timeIntervalSince1970: 1) }
                return now.addingTimeInterval(TimeInterval(seconds))
            }
            guard let expires else { return nil }
            let seconds = CurlDate.seconds(expires)  // libcurl's own date parser, as for headers
            guard seconds >= 0 else { return nil }
            return Date(timeIntervalSince1970: TimeInterval(max(seconds, 1)))
        }
    }

    /// RFC 6265 §5.1.4: the request path up to, not including, its last `/`; `/` at least.
    static func defaultPath(of url: URL) -> String {
        let path = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.path
        guard path.hasPrefix("/"), let last = path.lastIndex(of: "/"), last != path.startIndex else { return "/" }
        return String(path[..<last])
    }

    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
