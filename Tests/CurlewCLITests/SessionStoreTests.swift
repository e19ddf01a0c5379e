import Foundation
import XCTest
@testable import CurlewCLI
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
        try store.save(jar: try store.loadJar(), headers: ["X-Team": "blue", "Content-Type": "text/plain", "If-None-Match": "x"])
        XCTAssertEqual(try mode(store.cookieFile.path), 0o600)
        XCTAssertEqual(try mode(store.headerFile.path), 0o600)
        XCTAssertEqual(try store.loadHeaders(), ["X-Team": "blue"], "a request's own fields are not kept")
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
        try store.save(jar: nil, headers: ["A": "1"])
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
