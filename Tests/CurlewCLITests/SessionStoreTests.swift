import Foundation
import XCTest
@testable import CurlewCLI
import SessionCore
#if canImport(Glibc)
import Glibc
#endif

/// `--session` files hold credentials: made private, and nothing someone else could have
/// planted or could read is ever used.
final class SessionStoreTests: XCTestCase {
    private var root = URL(fileURLWithPath: "/")

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-sessions-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        chmod(root.path, 0o700)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: root)
    }

    private var environment: [String: String] { ["XDG_CONFIG_HOME": root.path] }

    private func mode(_ path: String) throws -> Int {
        try XCTUnwrap((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue)
    }

    func testDirectoriesAreCreatedPrivateAndFilesWrittenPrivate() throws {
        let store = try SessionStore(name: "work", environment: environment)
        XCTAssertEqual(store.cookieFile.path, root.appendingPathComponent("curlew/sessions/work.cookies").path)
        XCTAssertEqual(try mode(root.appendingPathComponent("curlew").path), 0o700)
        XCTAssertEqual(try mode(root.appendingPathComponent("curlew/sessions").path), 0o700)
        try store.save(jar: try store.loadJar(), headers: ["X-Team": "blue", "Content-Type": "text/plain", "If-None-Match": "x"], for: api)
        XCTAssertEqual(try mode(store.cookieFile.path), 0o600)
        XCTAssertEqual(try mode(store.headerFile.path), 0o600)
        XCTAssertEqual(try store.loadHeaders(for: api), ["X-Team": "blue"], "a request's own fields are not kept")
    }

    private let api = URL(string: "https://api.example.com/v1/items")!

    /// The merge tells cookies apart as libcurl does (the subdomain flag counts), and a cookie
    /// that merely expired during a run is not taken for one the run deleted (review of
    /// 2026-11-28: the first lost `.example.com`'s `a`, the second another run's fresh `s`).
    func testTheMergeKnowsCookiesAsLibcurlDoesAndExpiryIsNoDeletion() throws {
        let store = try SessionStore(name: "flags", environment: environment)
        let seed = try store.loadJar()
        let hour = Date(timeIntervalSinceNow: 3600)
        try seed.add(Cookie(name: "a", value: "wide", domain: "example.com", includesSubdomains: true, path: "/", expires: hour))
        try seed.add(Cookie(name: "a", value: "host", domain: "example.com", includesSubdomains: false, path: "/", expires: hour))
        try store.save(jar: seed, headers: [:], for: api)
        XCTAssertEqual(try store.loadJar().cookies.count, 2)

        let jar = try store.loadJar()
        var snapshot = SessionStore.Snapshot(cookieLines: try SessionStore.cookieLines(of: jar))
        try jar.add(Cookie(name: "a", value: "host2", domain: "example.com", includesSubdomains: false, path: "/", expires: hour))
        // As if `s` was alive when this run loaded and expired since; another run saved a
        // fresh `s` meanwhile.
        snapshot.cookieLines.insert(Array("example.com\tFALSE\t/\tFALSE\t1000\ts\told".utf8))
        let other = try store.loadJar()
        let otherSnapshot = SessionStore.Snapshot(cookieLines: try SessionStore.cookieLines(of: other))
        try other.add(Cookie(name: "s", value: "fresh", domain: "example.com", path: "/", expires: hour))
        try store.save(jar: other, headers: [:], for: api, since: otherSnapshot)
        try store.save(jar: jar, headers: [:], for: api, since: snapshot)

        let saved = try store.loadJar().cookies.map { "\($0.name)=\($0.value) \($0.includesSubdomains)" }.sorted()
        XCTAssertEqual(saved, ["a=host2 false", "a=wide true", "s=fresh false"])
    }

    /// The files are checked again when the run saves: something that took a file's place
    /// while the request ran (a FIFO would block the read, and the lock) is refused.
    func testAFileReplacedDuringTheRunIsRefusedAtSave() throws {
        let store = try SessionStore(name: "swapped", environment: environment)
        XCTAssertEqual(mkfifo(store.headerFile.path, 0o600), 0)
        XCTAssertThrowsError(try store.save(jar: nil, headers: ["A": "1"], for: api, since: SessionStore.Snapshot())) {
            XCTAssertTrue("\($0)".contains("is not a file of this user's own"), "\($0)")
        }
    }

    /// Two runs of one session at once: each saves what it changed onto what the files hold
    /// then. Until 2026-11-28 the run that saved last wrote its whole jar and header set, and
    /// the other run's new cookie and header were lost.
    func testTwoRunsOfOneSessionAtOnceKeepEachOthersChanges() throws {
        let store = try SessionStore(name: "both", environment: environment)
        let seed = try store.loadJar()
        try seed.add(Cookie(name: "old", value: "1", domain: "api.example.com", path: "/", expires: Date(timeIntervalSinceNow: 3600)))
        try seed.add(Cookie(name: "gone", value: "1", domain: "api.example.com", path: "/", expires: Date(timeIntervalSinceNow: 3600)))
        try store.save(jar: seed, headers: ["x-api-key": "k1", "X-Keep": "1"], for: api)

        // Both runs start from the same files.
        func begin() throws -> (CookieJar, SessionStore.Snapshot) {
            let jar = try store.loadJar()
            return (jar, SessionStore.Snapshot(cookieLines: try SessionStore.cookieLines(of: jar), headers: try store.loadHeaders(for: api)))
        }
        let (first, firstSnapshot) = try begin()
        let (second, secondSnapshot) = try begin()
        // The first run gets a cookie, loses one, and gives a header in another case.
        try first.add(Cookie(name: "a", value: "from-first", domain: "api.example.com", path: "/", expires: Date(timeIntervalSinceNow: 3600)))
        XCTAssertEqual(first.remove(name: "gone", domain: "api.example.com"), 1)
        var firstHeaders = firstSnapshot.headers
        firstHeaders["x-api-key"] = nil
        firstHeaders["X-Api-Key"] = "k2"
        // The second gets another cookie, changes "old", adds a header.
        try second.add(Cookie(name: "b", value: "from-second", domain: "api.example.com", path: "/", expires: Date(timeIntervalSinceNow: 3600)))
        try second.add(Cookie(name: "old", value: "2", domain: "api.example.com", path: "/", expires: Date(timeIntervalSinceNow: 3600)))
        var secondHeaders = secondSnapshot.headers
        secondHeaders["X-Second"] = "s"

        try store.save(jar: second, headers: secondHeaders, for: api, since: secondSnapshot)
        try store.save(jar: first, headers: firstHeaders, for: api, since: firstSnapshot)

        let saved = try store.loadJar().cookies.map { "\($0.name)=\($0.value)" }.sorted()
        XCTAssertEqual(saved, ["a=from-first", "b=from-second", "old=2"])
        XCTAssertEqual(try store.loadHeaders(for: api), ["X-Api-Key": "k2", "X-Keep": "1", "X-Second": "s"])
        XCTAssertEqual(try mode(store.cookieFile.path + ".lock"), 0o600)
    }

    /// Headers are kept per origin: a token given for one API is never sent to another host,
    /// port or scheme that a later run of the same session names; each origin keeps its own.
    func testHeadersAreBoundToTheOriginTheyWereGivenFor() throws {
        let store = try SessionStore(name: "work", environment: environment)
        try store.save(jar: nil, headers: ["Authorization": "Bearer api-token", "X-Team": "blue"], for: api)
        for other in ["https://evil.example.com/", "http://api.example.com/", "https://api.example.com:8443/", "https://example.com/"] {
            XCTAssertEqual(try store.loadHeaders(for: try XCTUnwrap(URL(string: other))), [:], other)
        }
        XCTAssertEqual(try store.loadHeaders(for: try XCTUnwrap(URL(string: "HTTPS://API.example.com:443/other?q=1"))),
                       ["Authorization": "Bearer api-token", "X-Team": "blue"], "the same origin, spelled otherwise")
        let mirror = try XCTUnwrap(URL(string: "http://127.0.0.1:8080/"))
        try store.save(jar: nil, headers: ["X-Team": "red"], for: mirror)
        XCTAssertEqual(try store.loadHeaders(for: mirror), ["X-Team": "red"])
        XCTAssertEqual(try store.loadHeaders(for: api)["X-Team"], "blue", "saving one origin keeps the others")
        try store.save(jar: nil, headers: [:], for: mirror)
        XCTAssertEqual(try store.loadHeaders(for: mirror), [:])
        XCTAssertEqual(SessionStore.origin(of: try XCTUnwrap(URL(string: "http://[::1]:9/x"))), "http://[::1]:9")
        XCTAssertNil(SessionStore.origin(of: URL(fileURLWithPath: "/tmp/x")))
    }

    /// A headers file of an earlier version (one set of headers, no origin) says nothing of
    /// the host they were for: none gets them, and the next save replaces them.
    func testHeadersKeptWithoutAnOriginAreNotSent() throws {
        let store = try SessionStore(name: "old", environment: environment)
        let descriptor = open(store.headerFile.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        close(descriptor)
        try Data(#"{"Authorization": "Bearer old-token"}"#.utf8).write(to: store.headerFile)
        XCTAssertEqual(try store.loadHeaders(for: api), [:])
        try store.save(jar: nil, headers: ["X-Team": "blue"], for: api)
        let text = String(decoding: try Data(contentsOf: store.headerFile), as: UTF8.self)
        XCTAssertFalse(text.contains("old-token"), text)
        XCTAssertEqual(try store.loadHeaders(for: api), ["X-Team": "blue"])
        try Data("[1, 2]".utf8).write(to: store.headerFile)
        XCTAssertThrowsError(try store.loadHeaders(for: api), "not a headers file")
    }

    func testNamesCannotLeaveTheDirectory() {
        for name in ["", ".hidden", "a b", "x;y", "..", "ü"] {
            XCTAssertThrowsError(try SessionStore(name: name, environment: environment), name)
        }
    }

    func testALinkInPlaceOfTheFileIsRefused() throws {
        let store = try SessionStore(name: "linked", environment: environment)
        let elsewhere = root.appendingPathComponent("elsewhere")
        try Data().write(to: elsewhere)
        try FileManager.default.createSymbolicLink(atPath: store.cookieFile.path, withDestinationPath: elsewhere.path)
        XCTAssertThrowsError(try SessionStore(name: "linked", environment: environment)) {
            XCTAssertTrue("\($0)".contains("a link is refused"), "\($0)")
        }
    }

    func testAFileOthersMayReadIsRefused() throws {
        let store = try SessionStore(name: "open", environment: environment)
        try store.save(jar: nil, headers: ["A": "1"], for: api)
        chmod(store.headerFile.path, 0o644)
        XCTAssertThrowsError(try SessionStore(name: "open", environment: environment)) {
            XCTAssertTrue("\($0)".contains("may be read by others"), "\($0)")
        }
    }

    func testADirectoryOthersMayWriteIsRefused() throws {
        _ = try SessionStore(name: "x", environment: environment)
        chmod(root.appendingPathComponent("curlew/sessions").path, 0o777)
        XCTAssertThrowsError(try SessionStore(name: "x", environment: environment)) {
            XCTAssertTrue("\($0)".contains("may be written by others"), "\($0)")
        }
    }

    /// The configuration directory is the user's own setting: a link there is followed (dotfiles
    /// linked from elsewhere), and group write by the user's private group allowed (umask 002:
    /// `~/.config` 0775); both refused every `--session`. Another group's write, anyone's
    /// write, and the directories curlew makes stay refused.
    func testTheConfigurationDirectoryMayBeALinkOrWritableByThePrivateGroup() throws {
        let real = root.appendingPathComponent("dotfiles-config")
        try FileManager.default.createDirectory(at: real, withIntermediateDirectories: true)
        chmod(real.path, 0o700)
        let linked = root.appendingPathComponent("config-link")
        try FileManager.default.createSymbolicLink(atPath: linked.path, withDestinationPath: real.path)
        XCTAssertNoThrow(try SessionStore(name: "a", environment: ["XDG_CONFIG_HOME": linked.path]))

        let shared = root.appendingPathComponent("umask-002")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
        chmod(shared.path, 0o775)
        XCTAssertEqual(chown(shared.path, getuid(), getgid()), 0)
        // Group write is the user's own only when the group is their private one (as for root
        // and for users of a system with user private groups); otherwise it stays refused.
        if SessionStore.isPrivateGroup(getgid()) {
            XCTAssertNoThrow(try SessionStore(name: "b", environment: ["XDG_CONFIG_HOME": shared.path]))
            XCTAssertEqual(try mode(shared.appendingPathComponent("curlew").path), 0o700)
        } else {
            XCTAssertThrowsError(try SessionStore(name: "b", environment: ["XDG_CONFIG_HOME": shared.path])) {
                XCTAssertTrue("\($0)".contains("may be written by others"), "\($0)")
            }
        }

        // Writable by a group that is not the user's private one, or by anyone: refused.
        let other = root.appendingPathComponent("other-group")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        chmod(other.path, 0o770)
        if chown(other.path, getuid(), getgid() == 1 ? 2 : 1) == 0 {
            XCTAssertThrowsError(try SessionStore(name: "c", environment: ["XDG_CONFIG_HOME": other.path])) {
                XCTAssertTrue("\($0)".contains("may be written by others"), "\($0)")
            }
        }
        chmod(shared.path, 0o777)
        XCTAssertThrowsError(try SessionStore(name: "d", environment: ["XDG_CONFIG_HOME": shared.path])) {
            XCTAssertTrue("\($0)".contains("may be written by others"), "\($0)")
        }
        // curlew's own directory keeps the strict rule whatever the group.
        chmod(shared.path, 0o700)
        try FileManager.default.createDirectory(at: shared.appendingPathComponent("curlew"), withIntermediateDirectories: true)
        chmod(shared.appendingPathComponent("curlew").path, 0o775)
        XCTAssertThrowsError(try SessionStore(name: "e", environment: ["XDG_CONFIG_HOME": shared.path])) {
            XCTAssertTrue("\($0)".contains("may be written by others"), "\($0)")
        }
    }

    func testALinkedSessionsDirectoryIsRefused() throws {
        let real = root.appendingPathComponent("real")
        try FileManager.default.createDirectory(at: real, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: root.appendingPathComponent("curlew"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root.appendingPathComponent("curlew/sessions").path, withDestinationPath: real.path)
        XCTAssertThrowsError(try SessionStore(name: "x", environment: environment)) {
            XCTAssertTrue("\($0)".contains("is not a directory (a link is refused)"), "\($0)")
        }
    }
}
