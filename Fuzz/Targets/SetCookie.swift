import Foundation

// Target: `Set-Cookie` parsing (Sources/SessionCore/Cookies/SetCookieParser.swift). The first
// line of the input is the URL the header came from, the rest the header. Properties: a cookie
// the parser accepts passes the Netscape format's rules, belongs to the URL's host, and
// survives the trip through a cookie-file line (what the jar writes and reads back).

private let fallbackURL = URL(string: "https://www.example.com/a/b/c")!
private let now = Date(timeIntervalSince1970: 1_700_000_000)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSetCookie(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let urlText = input.string(until: 0x0A)
    let url = URL(string: urlText) ?? fallbackURL
    let header = String(decoding: input.rest(), as: UTF8.self)
    guard let cookie = try? SetCookieParser.cookie(from: header, for: url, now: now) else { return 0 }
    do {
        try NetscapeCookieFormat.validate(cookie)
    } catch {
        fuzzCheck(false, "accepted cookie fails validation: \(error)")
    }
    let host = (url.host ?? "").lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
    fuzzCheck(host == cookie.domain || host.hasSuffix("." + cookie.domain), "domain \(cookie.domain) for host \(host)")
    guard let line = try? NetscapeCookieFormat.line(for: cookie) else { return 0 }
    let reread: Cookie?
    do {
        reread = try NetscapeCookieFormat.cookie(fromLine: Substring(line))
    } catch {
        fuzzCheck(false, "its own line \(line.debugDescription) is refused: \(error)")
        return 0
    }
    guard let reread else {
        fuzzCheck(false, "its own line \(line.debugDescription) reads as a comment")
        return 0
    }
    fuzzCheck(
        reread.name == cookie.name && reread.value == cookie.value && reread.domain == cookie.domain
            && reread.path == cookie.path && reread.includesSubdomains == cookie.includesSubdomains
            && reread.isSecure == cookie.isSecure && reread.isHTTPOnly == cookie.isHTTPOnly
            && (reread.expires == nil) == (cookie.expires == nil),
        "\(cookie) became \(reread) through \(line.debugDescription)")
    return 0
}
