import Foundation
import XCTest

@testable import SessionCore

/// The inputs libFuzzer found (Fuzz/Regressions/TARGET/), each checked for the property its
/// fuzz target checks (Fuzz/Targets/), so that a fixed finding stays fixed without the fuzzer.
final class FuzzRegressionTests: XCTestCase {
    /// The files under Fuzz/Regressions/`target`, found from this file's path.
    static func regressions(_ target: String) throws -> [(name: String, data: Data)] {
        let directory = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent()  // SessionCoreTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // <repo>
            .appendingPathComponent("Fuzz/Regressions/\(target)")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        XCTAssertFalse(names.isEmpty, "no inputs in \(directory.path)")
        return try names.map { ($0, try Data(contentsOf: directory.appendingPathComponent($0))) }
    }

    /// A cookie-file line that reads writes back as a line that reads as the same cookie. Found:
    /// a domain starting with a combining mark ("\u{592}xample.com", subdomains TRUE) is written
    /// ".\u{592}xample.com", where "." and the mark are one Character, so the leading dot was not
    /// recognised on reading and every save and load added one more.
    func testCookieFileLinesSurviveWritingAndReading() throws {
        for (name, data) in try Self.regressions("cookie-file") {
            for line in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
                guard let first = try? NetscapeCookieFormat.cookie(fromLine: line),
                    let written = try? NetscapeCookieFormat.line(for: first)
                else { continue }
                let second = try NetscapeCookieFormat.cookie(fromLine: Substring(written))
                XCTAssertEqual(second, first, "\(name): \(line.debugDescription) -> \(written.debugDescription)")
                XCTAssertEqual(try second.map(NetscapeCookieFormat.line(for:)), written, name)
            }
        }
    }

    /// A cookie a `Set-Cookie` header sets survives its cookie-file line. Found: the URL
    /// "http://..1042.71/" gave a host-only cookie for ".1042.71" (one dot dropped by `Cookie`),
    /// whose line was read back as "1042.71". A domain still starting with a dot is now refused.
    func testSetCookieCookiesSurviveTheirFileLine() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        for (name, data) in try Self.regressions("set-cookie") {
            let text = String(decoding: data, as: UTF8.self)
            let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
            let url = URL(string: String(parts[0])) ?? URL(string: "https://www.example.com/a/b/c")!
            guard let cookie = try? SetCookieParser.cookie(from: parts.count > 1 ? String(parts[1]) : "", for: url, now: now),
                let line = try? NetscapeCookieFormat.line(for: cookie)
            else { continue }
            let reread = try NetscapeCookieFormat.cookie(fromLine: Substring(line))
            XCTAssertEqual(reread?.domain, cookie.domain, "\(name): \(line.debugDescription)")
            XCTAssertEqual(reread?.includesSubdomains, cookie.includesSubdomains, name)
        }
    }

    /// A domain that still starts with a dot once `Cookie` dropped one is no host name.
    func testDomainWithTwoLeadingDotsIsRefused() {
        XCTAssertThrowsError(try NetscapeCookieFormat.validate(Cookie(name: "a", value: "b", domain: "..example.com")))
        XCTAssertThrowsError(try NetscapeCookieFormat.cookie(fromLine: "..example.com\tTRUE\t/\tFALSE\t0\ta\tb"))
        XCTAssertNoThrow(try NetscapeCookieFormat.cookie(fromLine: ".example.com\tTRUE\t/\tFALSE\t0\ta\tb"))
    }

    /// The leading dot of a domain is one byte, whatever follows it.
    func testLeadingDotBeforeACombiningMarkIsDropped() {
        XCTAssertEqual(Cookie(name: "a", value: "b", domain: ".\u{592}xample.com").domain, "\u{592}xample.com")
        XCTAssertEqual(Cookie(name: "a", value: "b", domain: ".Example.com").domain, "example.com")
    }
}
