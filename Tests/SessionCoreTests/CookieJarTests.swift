import Foundation
import XCTest
@testable import SessionCore

/// The jar's own API on libcurl's cookie store: add, list, remove, clear, Set-Cookie lines
/// checked against their URL, and Netscape files, with the edge values that must end in a
/// typed error and never a crash.
final class CookieJarTests: XCTestCase {
    private func url(_ string: String) throws -> URL {
        try XCTUnwrap(URL(string: string))
    }

    private func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-cookies-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }

    private func assertThrows(
        _ expected: (CookieJarError) -> Bool, file: StaticString = #filePath, line: UInt = #line,
        _ body: () throws -> Void
    ) {
        do {
            try body()
            XCTFail("expected an error", file: file, line: line)
        } catch let error as CookieJarError {
            XCTAssertTrue(expected(error), "\(error)", file: file, line: line)
        } catch {
            XCTFail("not a CookieJarError: \(error)", file: file, line: line)
        }
    }

    func testAddListRemoveAndClear() throws {
        let jar = CookieJar()
        XCTAssertTrue(jar.isAvailable)
        XCTAssertEqual(jar.cookies, [])
        let later = Date(timeIntervalSince1970: 4_000_000_000)
        let session = Cookie(name: "s", value: "1", domain: "Example.com")
        let persistent = Cookie(
            name: "p", value: "two words", domain: ".example.com", includesSubdomains: true, path: "/app",
            isSecure: true, isHTTPOnly: true, expires: later)
        try jar.add([session, persistent, Cookie(name: "empty", value: "", domain: "other.test")])
        XCTAssertEqual(jar.cookies.map(\.name), ["s", "p", "empty"], "ordered by domain, path, name")
        let stored = try XCTUnwrap(jar.cookies.first { $0.name == "p" })
        XCTAssertEqual(stored, persistent)
        XCTAssertEqual(stored.domain, "example.com")
        XCTAssertTrue(stored.includesSubdomains && stored.isSecure && stored.isHTTPOnly)
        XCTAssertEqual(jar.cookies.first { $0.name == "s" }, Cookie(name: "s", value: "1", domain: "example.com"))
        XCTAssertEqual(jar.cookies.first { $0.name == "empty" }?.value, "")

        // Same name, domain, flag and path: replaced, not duplicated.
        try jar.add(Cookie(name: "s", value: "2", domain: "example.com"))
        XCTAssertEqual(jar.cookies.filter { $0.name == "s" }.map(\.value), ["2"])

        XCTAssertEqual(jar.remove(name: "p", domain: "example.com", path: "/other"), 0)
        XCTAssertEqual(jar.remove(name: "p", domain: ".EXAMPLE.com"), 1)
        XCTAssertNil(jar.cookies.first { $0.name == "p" })

        try jar.add(persistent)
        jar.removeSessionCookies()
        XCTAssertEqual(jar.cookies.map(\.name), ["p"])
        jar.removeAll()
        XCTAssertEqual(jar.cookies, [])
    }

    func testInvalidCookiesThrowAndAddNothing() {
        let jar = CookieJar()
        let valid = Cookie(name: "ok", value: "1", domain: "example.com")
        let invalid: [Cookie] = [
            Cookie(name: "", value: "1", domain: "example.com"),
            Cookie(name: "a\tb", value: "1", domain: "example.com"),
            Cookie(name: "a=b", value: "1", domain: "example.com"),
            Cookie(name: "a", value: "tab\there", domain: "example.com"),
            Cookie(name: "a", value: "line\nbreak", domain: "example.com"),
            Cookie(name: "a", value: "semi;colon", domain: "example.com"),
            Cookie(name: "a", value: "1", domain: ""),
            Cookie(name: "a", value: "1", domain: "exa mple.com"),
            Cookie(name: "a", value: "1", domain: "example.com", path: "relative"),
            Cookie(name: "a", value: String(repeating: "x", count: 5000), domain: "example.com"),
            Cookie(name: "__Secure-a", value: "1", domain: "example.com"),
            Cookie(name: "__Host-a", value: "1", domain: "example.com", includesSubdomains: true, isSecure: true),
            Cookie(name: "a", value: "1", domain: "example.com", expires: Date(timeIntervalSince1970: .nan)),
        ]
        for cookie in invalid {
            assertThrows({ if case .invalidCookie = $0 { return true } else { return false } }) {
                try jar.add([valid, cookie])
            }
        }
        XCTAssertEqual(jar.cookies, [], "a batch with one invalid cookie adds none")
        // The prefixes' rules, kept: accepted.
        XCTAssertNoThrow(try jar.add(Cookie(name: "__Host-a", value: "1", domain: "example.com", isSecure: true)))
    }

    func testExpiryEdgeValues() throws {
        let jar = CookieJar()
        try jar.add([
            Cookie(name: "far", value: "1", domain: "example.com", expires: .distantFuture),
            Cookie(name: "huge", value: "1", domain: "example.com", expires: Date(timeIntervalSince1970: 1e300)),
            Cookie(name: "infinite", value: "1", domain: "example.com", expires: Date(timeIntervalSince1970: .infinity)),
            Cookie(name: "epoch", value: "1", domain: "example.com", expires: Date(timeIntervalSince1970: 0)),
            Cookie(name: "past", value: "1", domain: "example.com", expires: Date(timeIntervalSince1970: -1e12)),
        ])
        let byName = Dictionary(uniqueKeysWithValues: jar.cookies.map { ($0.name, $0) })
        XCTAssertEqual(Set(byName.keys), ["far", "huge", "infinite"], "expired cookies are not kept")
        XCTAssertEqual(byName["far"]?.expires, .distantFuture)
        XCTAssertEqual(byName["huge"]?.expires?.timeIntervalSince1970, Double(Int64.max))

        // An expired copy removes the stored cookie (what a server's Max-Age=0 does).
        try jar.add(Cookie(name: "far", value: "", domain: "example.com", expires: Date(timeIntervalSinceNow: -60)))
        XCTAssertNil(jar.cookies.first { $0.name == "far" })
    }

    func testSetCookieIsCheckedAgainstItsURL() throws {
        let jar = CookieJar()
        let page = try url("https://www.example.com/shop/cart?x=1")
        let hostOnly = try jar.add(setCookie: "Set-Cookie: id = 42 ; HttpOnly; Max-Age=3600", for: page)
        XCTAssertEqual(hostOnly.domain, "www.example.com")
        XCTAssertFalse(hostOnly.includesSubdomains)
        XCTAssertEqual(hostOnly.path, "/shop", "RFC 6265 default path: the URL's directory")
        XCTAssertTrue(hostOnly.isHTTPOnly)
        XCTAssertEqual(hostOnly.value, "42")
        let expires = try XCTUnwrap(hostOnly.expires)
        XCTAssertEqual(expires.timeIntervalSinceNow, 3600, accuracy: 60)

        let wide = try jar.add(setCookie: "w=1; Domain=.Example.COM; Path=/; Secure; Expires=Wed, 21 Oct 2065 07:28:00 GMT", for: page)
        XCTAssertEqual(wide.domain, "example.com")
        XCTAssertTrue(wide.includesSubdomains && wide.isSecure)
        XCTAssertEqual(wide.expires, Date(timeIntervalSince1970: 3_023_335_680))
        let session = try jar.add(setCookie: "u=1; Expires=not a date", for: page)
        XCTAssertNil(session.expires, "an unparseable Expires leaves a session cookie, as in libcurl")

        func rejected(_ header: String, _ target: URL) {
            assertThrows({ if case .rejected = $0 { return true } else { return false } }) {
                try jar.add(setCookie: header, for: target)
            }
        }
        rejected("a=1; Domain=co.uk", try url("https://www.example.co.uk/"))
        rejected("a=1; Domain=com", page)
        rejected("a=1; Domain=other.com", page)
        rejected("a=1; Domain=ample.com", page)
        rejected("a=1; Secure", try url("http://www.example.com/"))
        rejected("a=1; Domain=127.0.0.2", try url("http://127.0.0.1/"))
        rejected("=1", page)
        rejected("novalue", page)
        rejected("a=1\tb", page)
        assertThrows({ if case .invalidURL = $0 { return true } else { return false } }) {
            try jar.add(setCookie: "a=1", for: try XCTUnwrap(URL(string: "file:///tmp/x")))
        }
        XCTAssertEqual(Set(jar.cookies.map(\.name)), ["id", "w", "u"])

        // Secure from localhost over http (a secure context for libcurl) and an IP's own cookie.
        let local = try jar.add(setCookie: "l=1; Secure", for: try url("http://localhost:8080/"))
        XCTAssertTrue(local.isSecure)
        let address = try jar.add(setCookie: "ip=1; Domain=127.0.0.1", for: try url("http://127.0.0.1/"))
        XCTAssertFalse(address.includesSubdomains)
        // Max-Age=0 removes.
        try jar.add(setCookie: "id=; Max-Age=0; Path=/shop", for: page)
        XCTAssertNil(jar.cookies.first { $0.name == "id" })

        // Max-Age's leading digits, and a quoted path, as libcurl's engine reads the same
        // header (it deleted the cookie, and filed it under the default path).
        for (maxAge, seconds) in [("3600abc", 3600.0), ("1.5", 1.0), ("\"120\"", 120.0)] {
            let cookie = try jar.add(setCookie: "m=1; Max-Age=\(maxAge)", for: page)
            XCTAssertEqual(try XCTUnwrap(cookie.expires, maxAge).timeIntervalSinceNow, seconds, accuracy: 60, maxAge)
        }
        for junk in ["-1", "abc", ""] {
            try jar.add(setCookie: "m=1; Max-Age=\(junk)", for: page)
            XCTAssertNil(jar.cookies.first { $0.name == "m" }, "Max-Age=\(junk) expires it")
        }
        XCTAssertEqual(try jar.add(setCookie: "q=1; Path=\"/shop/cart\"", for: page).path, "/shop/cart")
        // Strict Secure: plain http may not overlay a Secure cookie of the same name whose
        // domain and path match, as libcurl's own engine refuses it; https may, and another
        // name, or a path outside the Secure one's, may.
        try jar.add(setCookie: "sid=good; Secure; Domain=example.com; Path=/", for: try url("https://www.example.com/"))
        assertThrows({ if case .rejected = $0 { return true } else { return false } }) {
            try jar.add(setCookie: "sid=evil; Path=/", for: try url("http://www.example.com/"))
        }
        assertThrows({ if case .rejected = $0 { return true } else { return false } }) {
            try jar.add(setCookie: "sid=evil; Domain=example.com; Path=/shop", for: try url("http://shop.example.com/"))
        }
        XCTAssertEqual(jar.cookies.filter { $0.name == "sid" }.map(\.value), ["good"])
        XCTAssertNoThrow(try jar.add(setCookie: "other=1; Path=/", for: try url("http://www.example.com/")))
        XCTAssertNoThrow(try jar.add(setCookie: "sid=fine; Path=/", for: try url("http://unrelated.test/")))
        try jar.add(setCookie: "sid=new; Secure; Domain=example.com; Path=/", for: try url("https://www.example.com/"))
        XCTAssertEqual(jar.cookies.filter { $0.name == "sid" && $0.domain == "example.com" }.map(\.value), ["new"])

        // A far-future Max-Age comes back from libcurl as its largest time: describing the
        // cookie trapped on the conversion to an Int64.
        try jar.add(setCookie: "far=1; Max-Age=99999999999999999999", for: page)
        let far = try XCTUnwrap(jar.cookies.first { $0.name == "far" })
        XCTAssertTrue(String(describing: far).hasSuffix("expires=\(Int64.max)"), String(describing: far))
    }

    func testSaveAndLoadRoundTripInNetscapeFormat() throws {
        let directory = try temporaryDirectory()
        let file = directory.appendingPathComponent("cookies.txt")
        let jar = CookieJar()
        let cookies = [
            Cookie(name: "a", value: "1", domain: "example.com"),
            Cookie(name: "b", value: "x y", domain: "example.org", includesSubdomains: true, path: "/p", isSecure: true,
                   isHTTPOnly: true, expires: Date(timeIntervalSince1970: 4_000_000_000)),
            Cookie(name: "c", value: "", domain: "example.net", expires: .distantFuture),
        ]
        try jar.add(cookies)
        try jar.save(to: file)

        let text = try String(contentsOf: file, encoding: .utf8)
        XCTAssertTrue(text.hasPrefix("# Netscape HTTP Cookie File\n"))
        XCTAssertTrue(text.contains("#HttpOnly_.example.org\tTRUE\t/p\tTRUE\t4000000000\tb\tx y\n"), text)
        XCTAssertTrue(text.contains("example.com\tFALSE\t/\tFALSE\t0\ta\t1\n"), text)
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)

        let copy = CookieJar()
        try copy.load(from: file)
        XCTAssertEqual(copy.cookies, jar.cookies)
        XCTAssertEqual(Set(copy.cookies), Set(cookies))

        // Saving again replaces the file.
        jar.removeAll()
        try jar.save(to: file)
        let empty = CookieJar()
        try empty.load(from: file)
        XCTAssertEqual(empty.cookies, [])
    }

    /// A cookie holds the bytes its server sent, Latin-1 ones too (libcurl keeps them, and
    /// curl's `-c` writes them): a file round trip and the copy into a fresh share (after a
    /// policy change or a reset) keep them; they became U+FFFD's three bytes, and the cookie
    /// went back to its server changed.
    func testACookieValueThatIsNotUTF8KeepsItsBytes() throws {
        let directory = try temporaryDirectory()
        let source = directory.appendingPathComponent("curl-written.txt")
        let latin1 = Data("example.com\tFALSE\t/\tFALSE\t0\tcity\tZ".utf8) + [0xFC] + Data("rich\n".utf8)  // "Zürich" in Latin-1
        let utf8 = Data("example.com\tFALSE\t/\tFALSE\t0\tword\tcafé\n".utf8)
        try (latin1 + utf8).write(to: source)
        let jar = CookieJar()
        try jar.load(from: source)
        XCTAssertEqual(Set(jar.cookies.map(\.name)), ["city", "word"])

        let saved = directory.appendingPathComponent("saved.txt")
        try jar.save(to: saved)
        let written = try Data(contentsOf: saved)
        XCTAssertNotNil(written.range(of: latin1), "the Latin-1 line was rewritten: \(String(decoding: written, as: UTF8.self).debugDescription)")
        XCTAssertNotNil(written.range(of: utf8))

        // The copy a policy change or a reset makes into a fresh share.
        XCTAssertEqual(jar.share?.replaceSessionCachesIfIdle(), true)
        try jar.save(to: saved)
        XCTAssertNotNil(try Data(contentsOf: saved).range(of: latin1), "the copy into the fresh share rewrote the value")
        let reloaded = CookieJar()
        try reloaded.load(from: saved)
        try reloaded.save(to: saved)
        XCTAssertNotNil(try Data(contentsOf: saved).range(of: latin1), "a second round trip rewrote it")
    }

    func testLoadingBadFilesThrowsAndAddsNothing() throws {
        let directory = try temporaryDirectory()
        let jar = CookieJar()
        assertThrows({ if case .fileNotReadable = $0 { return true } else { return false } }) {
            try jar.load(from: directory.appendingPathComponent("missing.txt"))
        }
        assertThrows({ if case .fileNotReadable = $0 { return true } else { return false } }) {
            try jar.load(from: directory)
        }
        // A FIFO planted where the file goes: refused at once (the open waited for a writer
        // for good), whether loaded or merged into by a save.
        let fifo = directory.appendingPathComponent("planted.txt")
        XCTAssertEqual(mkfifo(fifo.path, 0o600), 0)
        assertThrows({ if case .fileNotReadable = $0 { return true } else { return false } }) {
            try jar.load(from: fifo)
        }
        assertThrows({ if case .fileNotReadable = $0 { return true } else { return false } }) {
            try jar.save(to: fifo, mergingChangesSince: [])
        }
        let malformed: [(String, Int)] = [
            ("example.com\tFALSE\t/\tFALSE\t0\tgood\t1\nexample.com\tFALSE\t/\n", 2),
            ("# comment\n\nexample.com\tMAYBE\t/\tFALSE\t0\tn\tv\n", 3),
            ("example.com\tFALSE\t/\tFALSE\tsoon\tn\tv\n", 1),
            ("example.com\tFALSE\t/\tFALSE\t99999999999999999999999\tn\tv\n", 1),
            ("example.com\tFALSE\t/\tFALSE\t0\t\tv\n", 1),
            ("example.com\tFALSE\t/\tFALSE\t0\tn\tv\textra\n", 1),
        ]
        for (index, (content, line)) in malformed.enumerated() {
            let file = directory.appendingPathComponent("bad\(index).txt")
            try Data(content.utf8).write(to: file)
            assertThrows({ if case .malformedFile(_, line, _) = $0 { return true } else { return false } }) {
                try jar.load(from: file)
            }
        }
        let binary = directory.appendingPathComponent("binary.txt")
        try Data("# comment\n".utf8 + [0xFF, 0xFE, 0x0A]).write(to: binary)
        assertThrows({ if case .malformedFile(_, 2, _) = $0 { return true } else { return false } }) {
            try jar.load(from: binary)
        }
        XCTAssertEqual(jar.cookies, [])

        // Expired lines and CRLF line ends are what curl accepts: loaded (the expired one dropped).
        let good = directory.appendingPathComponent("good.txt")
        try Data("example.com\tFALSE\t/\tFALSE\t1\told\tv\r\nexample.com\tFALSE\t/\tFALSE\t0\tnew\tv\r\n".utf8).write(to: good)
        try jar.load(from: good)
        XCTAssertEqual(jar.cookies.map(\.name), ["new"])

        // An expired line is a stale copy: it leaves the live cookie the jar got since alone.
        try jar.add(setCookie: "old=fresh; Max-Age=3600", for: try url("http://example.com/"))
        try jar.load(from: good)
        XCTAssertEqual(jar.cookies.first { $0.name == "old" }?.value, "fresh", "an old file deleted a live cookie")
    }

    func testSavingWhereNoFileCanBeWrittenThrows() throws {
        let directory = try temporaryDirectory()
        let jar = CookieJar()
        try jar.add(Cookie(name: "a", value: "1", domain: "example.com"))
        assertThrows({ if case .fileNotWritable = $0 { return true } else { return false } }) {
            try jar.save(to: directory.appendingPathComponent("missing/cookies.txt"))
        }
        let notADirectory = directory.appendingPathComponent("plain")
        try Data("x".utf8).write(to: notADirectory)
        assertThrows({ if case .fileNotWritable = $0 { return true } else { return false } }) {
            try jar.save(to: notADirectory.appendingPathComponent("cookies.txt"))
        }
        assertThrows({ if case .fileNotWritable = $0 { return true } else { return false } }) {
            try jar.save(to: directory)  // a directory cannot be replaced by a file
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path), ["plain"], "no temporary file left")
    }

    /// The jar is used from many threads at once (its calls and libcurl's lock callbacks).
    func testConcurrentUseFromManyThreads() throws {
        let jar = CookieJar()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for index in 0..<50 {
                try? jar.add(Cookie(name: "c\(index)", value: "\(worker)", domain: "w\(worker).example"))
                _ = jar.cookies.count
            }
        }
        XCTAssertEqual(jar.cookies.count, 400)
    }
}
