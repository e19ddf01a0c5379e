import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif
@testable import SessionCore

/// The final move of a download never replaces what is at its destination, on one file system
/// (`renameat2` with `RENAME_NOREPLACE`) and across two (a copy into a file made with `O_EXCL`).
final class DestinationMoveTests: XCTestCase {
    /// A directory on the file system of the system's temporary directory.
    var local: URL!
    /// A directory on another file system (`/dev/shm`), when this machine has one.
    var other: URL?

    override func setUp() async throws {
        local = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-move-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: local, withIntermediateDirectories: true)
        let shm = URL(fileURLWithPath: "/dev/shm/curlew-move-\(UUID().uuidString)")
        if (try? FileManager.default.createDirectory(at: shm, withIntermediateDirectories: false)) != nil {
            other = shm
        }
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: local)
        if let other { try? FileManager.default.removeItem(at: other) }
    }

    /// The other file system's directory; skips when the machine has none.
    private func otherFileSystem() throws -> URL {
        guard let other, device(of: other) != device(of: local) else {
            throw XCTSkip("no second file system (/dev/shm) on this machine")
        }
        return other
    }

    private func device(of url: URL) -> UInt64 {
        var found = stat()
        return stat(url.path, &found) == 0 ? UInt64(found.st_dev) : 0
    }

    private func file(_ directory: URL, _ name: String, _ bytes: Data) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try bytes.write(to: url)
        return url
    }

    private func message(_ error: SessionError) -> String {
        if case .fileWriteFailed(let detail) = error { return detail }
        return "not fileWriteFailed: \(error)"
    }

    func testAMoveOnOneFileSystemKeepsEveryByte() throws {
        let body = patternedData(count: 300_000)
        let source = try file(local, "download.tmp", body)
        let destination = local.appendingPathComponent("file.bin")
        try DestinationMove.move(source, to: destination)
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertFalse(FileManager.default.fileExists(atPath: source.path))
    }

    /// A file, and a dangling symbolic link (which `fileExists` does not see), are both kept.
    func testNothingAtTheDestinationIsReplaced() throws {
        let source = try file(local, "download.tmp", Data("new".utf8))
        let taken = try file(local, "taken", Data("mine".utf8))
        let link = local.appendingPathComponent("link")
        XCTAssertEqual(symlink(local.appendingPathComponent("nowhere").path, link.path), 0)
        for destination in [taken, link] {
            XCTAssertThrowsError(try DestinationMove.move(source, to: destination)) { error in
                let detail = (error as? SessionError).map(message) ?? "\(error)"
                XCTAssertTrue(detail.contains("already there"), detail)
            }
        }
        XCTAssertEqual(try Data(contentsOf: taken), Data("mine".utf8))
        XCTAssertEqual(
            try FileManager.default.destinationOfSymbolicLink(atPath: link.path), local.appendingPathComponent("nowhere").path)
        XCTAssertFalse(FileManager.default.fileExists(atPath: local.appendingPathComponent("nowhere").path))
        XCTAssertEqual(try Data(contentsOf: source), Data("new".utf8), "a refused move leaves the source")
    }

    /// Across file systems the bytes are copied (more than one buffer's worth), the copy keeps
    /// the download's private mode, and the source goes.
    func testAMoveAcrossFileSystemsCopiesEveryByte() throws {
        let other = try otherFileSystem()
        let body = patternedData(count: DestinationMove.copyBufferSize * 3 + 12_345)
        let source = try file(other, "download.tmp", body)
        XCTAssertEqual(chmod(source.path, 0o600), 0)
        let destination = local.appendingPathComponent("file.bin")
        try DestinationMove.move(source, to: destination)
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertFalse(FileManager.default.fileExists(atPath: source.path))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: local.path), ["file.bin"], "no copy left beside it")
        var found = stat()
        XCTAssertEqual(stat(destination.path, &found), 0)
        XCTAssertEqual(found.st_mode & 0o777, 0o600)
    }

    /// A destination name near the limit (NAME_MAX, 255 bytes): the copy's own name stays short.
    func testAMoveAcrossFileSystemsToALongNameWorks() throws {
        let other = try otherFileSystem()
        let source = try file(other, "download.tmp", Data("long".utf8))
        let destination = local.appendingPathComponent(String(repeating: "n", count: 250))
        try DestinationMove.move(source, to: destination)
        XCTAssertEqual(try Data(contentsOf: destination), Data("long".utf8))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: local.path), [destination.lastPathComponent])
    }

    func testAMoveAcrossFileSystemsReplacesNothingEither() throws {
        let other = try otherFileSystem()
        let source = try file(other, "download.tmp", Data("new".utf8))
        let taken = try file(local, "taken", Data("mine".utf8))
        let link = local.appendingPathComponent("link")
        let target = local.appendingPathComponent("target")
        XCTAssertEqual(symlink(target.path, link.path), 0)
        for destination in [taken, link] {
            XCTAssertThrowsError(try DestinationMove.move(source, to: destination))
        }
        XCTAssertEqual(try Data(contentsOf: taken), Data("mine".utf8))
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.path), "no file made through the link")
        XCTAssertEqual(try Data(contentsOf: source), Data("new".utf8))
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: local.path)), ["taken", "link"], "no copy left beside them")
    }

    /// A copy that cannot be made (no such directory) leaves no partial file and the source.
    func testAFailedCopyLeavesTheSource() throws {
        let other = try otherFileSystem()
        let source = try file(other, "download.tmp", Data("new".utf8))
        let destination = local.appendingPathComponent("no/such/dir/file")
        XCTAssertThrowsError(try DestinationMove.move(source, to: destination)) { error in
            let detail = (error as? SessionError).map(message) ?? "\(error)"
            XCTAssertTrue(detail.contains("no/such/dir"), detail)
        }
        XCTAssertEqual(try Data(contentsOf: source), Data("new".utf8))
    }
}
