import Foundation

// Target: the Netscape cookie-file line reader (Sources/SessionCore/Cookies/NetscapeCookieFormat.swift),
// one line at a time as the jar reads a file. Properties: a line that is read writes back as a
// line that reads as the same cookie, and a second round changes nothing (the first may
// normalise: a leading dot, an expiry beyond what the format holds).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCookieFile(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size), as: UTF8.self)
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        guard let first = try? NetscapeCookieFormat.cookie(fromLine: line) else { continue }
        guard let written = try? NetscapeCookieFormat.line(for: first) else { continue }
        guard let second = try? NetscapeCookieFormat.cookie(fromLine: Substring(written)) else {
            fuzzCheck(false, "\(first) wrote \(written.debugDescription), which does not read back")
            continue
        }
        fuzzCheck(
            second.name == first.name && second.value == first.value && second.domain == first.domain
                && second.path == first.path && second.includesSubdomains == first.includesSubdomains
                && second.isSecure == first.isSecure && second.isHTTPOnly == first.isHTTPOnly,
            "\(first) became \(second)")
        guard let rewritten = try? NetscapeCookieFormat.line(for: second) else {
            fuzzCheck(false, "\(second) cannot be written again")
            continue
        }
        fuzzCheck(rewritten == written, "second round \(rewritten.debugDescription) != \(written.debugDescription)")
    }
    return 0
}
