import Foundation

/// Why a ``CookieJar`` operation failed. Nothing in the jar changes when one is thrown.
public enum CookieJarError: Error, Sendable, Equatable, CustomStringConvertible {
    /// libcurl could not create the jar's cookie store (curl unusable or out of memory).
    case unavailable(String)
    /// The cookie cannot be stored: the reason names the field (an empty name, a control
    /// character or tab, a path not starting with `/`, a `__Secure-`/`__Host-` prefix rule...).
    case invalidCookie(String)
    /// A `Set-Cookie` value was refused for its URL: malformed, a `Domain` the URL's host is not
    /// in, a public suffix (`Domain=co.uk`), or `Secure` from an insecure origin.
    case rejected(String)
    /// The URL has no host, or a scheme other than http or https.
    case invalidURL(String)
    /// The file does not exist or could not be read.
    case fileNotReadable(path: String, reason: String)
    /// The file is not in curl's Netscape cookie format: the first offending line (1-based).
    case malformedFile(path: String, line: Int, reason: String)
    /// The file could not be written (the jar is unchanged; no partial file is left behind).
    case fileNotWritable(path: String, reason: String)

    /// A readable explanation.
    public var description: String {
        switch self {
        case .unavailable(let reason): return "cookie jar unavailable: \(reason)"
        case .invalidCookie(let reason): return "invalid cookie: \(reason)"
        case .rejected(let reason): return "cookie refused: \(reason)"
        case .invalidURL(let reason): return "invalid cookie URL: \(reason)"
        case .fileNotReadable(let path, let reason): return "cannot read cookie file '\(path)': \(reason)"
        case .malformedFile(let path, let line, let reason): return "'\(path)' line \(line): \(reason)"
        case .fileNotWritable(let path, let reason): return "cannot write cookie file '\(path)': \(reason)"
        }
    }
}
