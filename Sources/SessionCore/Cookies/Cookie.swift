import Foundation

/// One cookie as a ``CookieJar`` keeps it: the fields of a line of curl's Netscape cookie file.
///
/// A cookie is identified by its ``name``, ``domain``, ``includesSubdomains`` and ``path``
/// (RFC 6265 §5.3 step 11): adding a cookie with the same four replaces the stored one.
public struct Cookie: Sendable, Hashable {
    /// The name; never empty.
    public var name: String
    /// The value; may be empty.
    public var value: String
    /// The domain, lowercase and without a leading dot, e.g. `"example.com"`.
    public var domain: String
    /// Whether the cookie is also sent to subdomains of ``domain`` (it was set with a `Domain`
    /// attribute). False: a host-only cookie, sent to exactly ``domain``.
    public var includesSubdomains: Bool
    /// The path prefix the cookie is sent to, starting with `/`.
    public var path: String
    /// Sent only over `https://` (and, as libcurl and browsers treat them as secure contexts, to
    /// `localhost`, `127.0.0.1` and `::1` over `http://`).
    public var isSecure: Bool
    /// Set with `HttpOnly` (kept and sent as any cookie: Curlew runs no scripts).
    public var isHTTPOnly: Bool
    /// When the cookie expires; nil for a session cookie (kept until the jar is cleared of
    /// session cookies, emptied or released).
    public var expires: Date?

    /// Whether the cookie is sent to exactly ``domain`` only.
    public var isHostOnly: Bool { !includesSubdomains }
    /// Whether the cookie has no expiry date.
    public var isSessionCookie: Bool { expires == nil }

    /// Creates a cookie value (checked when it is added to a jar).
    ///
    /// - Parameters:
    ///   - name: The name; must not be empty.
    ///   - value: The value.
    ///   - domain: The host or domain it belongs to; a leading dot is dropped.
    ///   - includesSubdomains: Also send it to subdomains of `domain`. Default: false (host-only).
    ///   - path: The path prefix; must start with `/`. Default: `/`.
    ///   - isSecure: Send only over secure connections. Default: false.
    ///   - isHTTPOnly: The `HttpOnly` flag. Default: false.
    ///   - expires: The expiry date; nil for a session cookie. Default: nil.
    public init(
        name: String, value: String, domain: String, includesSubdomains: Bool = false, path: String = "/",
        isSecure: Bool = false, isHTTPOnly: Bool = false, expires: Date? = nil
    ) {
        self.name = name
        self.value = value
        // The dot is looked for as a scalar: "." and a combining mark after it are one Character,
        // and a Character test would keep the dot (and a file line would gain one per save).
        let scalars = domain.unicodeScalars
        self.domain = (scalars.first == "." ? String(scalars.dropFirst()) : domain).lowercased()
        self.includesSubdomains = includesSubdomains
        self.path = path
        self.isSecure = isSecure
        self.isHTTPOnly = isHTTPOnly
        self.expires = expires
    }

    /// The `name=value` pair as it appears in a `Cookie` request header.
    public var headerPair: String { "\(name)=\(value)" }
}

extension Cookie: CustomStringConvertible {
    /// A readable summary, e.g. `session=abc; domain=.example.com; path=/; secure`.
    public var description: String {
        var parts = ["\(name)=\(value)", "domain=\(includesSubdomains ? "." : "")\(domain)", "path=\(path)"]
        if isSecure { parts.append("secure") }
        if isHTTPOnly { parts.append("httponly") }
        // Clamped as the jar stores it: a server's `Max-Age=99999999999999999999` comes back
        // from libcurl as its largest time, a Double just past Int64.max (a trap here).
        if let expires { parts.append("expires=\((try? NetscapeCookieFormat.expirySeconds(expires)) ?? 0)") }
        return parts.joined(separator: "; ")
    }
}
