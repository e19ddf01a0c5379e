import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
@testable import SessionCore

/// The response cache's directory is the user's own: created 0700 with 0600 files, refused
/// when another user owns it, and shared (with its size limit) by every cache given it.
final class ResponseCacheDiskSecurityTests: XCTestCase {
    var server: TestServer!
    var root: URL!

    override func setUp() async throws {
        server = try TestServer()
        root = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-disk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        for index in 0..<8 {
            server.route("/item\(index)", response: TestResponse(
                status: 200, headers: [("Cache-Control", "max-age=600")], body: Data(repeating: UInt8(index), count: 30_000)))
        }
    }

    override func tearDown() async throws {
        server.shutdown()
        try? FileManager.default.removeItem(at: root)
    }

    private func manager(_ cache: ResponseCache) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.responseCache = cache
        return URLSessionManager.raw(configuration)
    }

    private func get(_ manager: URLSessionManager, _ path: String) async throws -> DataResponse {
        await manager.response(for: URLRequest(url: try server.url(path)))
    }

    private func mode(_ url: URL) throws -> mode_t {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { throw CocoaError(.fileReadNoSuchFile) }
        return info.st_mode & 0o777
    }

    private func files(_ directory: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
    }

    private func totalSize(_ directory: URL) throws -> Int {
        try files(directory).reduce(0) { sum, file in
            sum + ((try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0)
        }
    }

    func testTheDirectoryIsCreated0700AndEntries0600() async throws {
        let directory = root.appendingPathComponent("nested/cache")
        let cache = ResponseCache(directory: directory)
        XCTAssertNil(cache.diskStoreError)
        _ = try await get(manager(cache), "/item0")
        try await eventually({ (try? self.files(directory).count) == 1 }, "stored")
        XCTAssertEqual(try mode(directory), 0o700)
        XCTAssertEqual(try mode(root.appendingPathComponent("nested")), 0o700, "components it creates are private too")
        for file in try files(directory) { XCTAssertEqual(try mode(file), 0o600, file.lastPathComponent) }
    }

    func testAnExistingDirectoryOfTheUsersIsNarrowedTo0700() throws {
        let directory = root.appendingPathComponent("wide")
        XCTAssertEqual(mkdir(directory.path, 0o755), 0)
        XCTAssertEqual(chmod(directory.path, 0o755), 0)
        let cache = ResponseCache(directory: directory)
        XCTAssertNil(cache.diskStoreError)
        XCTAssertEqual(try mode(directory), 0o700)
    }

    /// Someone else made the directory first (a predictable name under /tmp) and may have
    /// planted answers in it: the cache refuses it and says why, and keeps to memory.
    func testADirectoryOwnedByAnotherUserIsRefused() async throws {
        let directory = root.appendingPathComponent("planted")
        XCTAssertEqual(mkdir(directory.path, 0o777), 0)
        XCTAssertEqual(chown(directory.path, 65534, 65534), 0, "tests run as root")
        let cache = ResponseCache(directory: directory)
        guard case .directoryOwnedByAnotherUser(_, let owner)? = cache.diskStoreError else {
            return XCTFail("expected a refusal, got \(String(describing: cache.diskStoreError))")
        }
        XCTAssertEqual(owner, 65534)
        XCTAssertEqual(cache.diskCapacity, 0)
        let manager = manager(cache)
        _ = try await get(manager, "/item0")
        let again = try await get(manager, "/item0")
        XCTAssertNil(again.metrics, "the memory cache still works")
        XCTAssertEqual(try files(directory).count, 0, "nothing written to the foreign directory")
        XCTAssertTrue(cache.diskStoreError?.description.contains("65534") ?? false)
    }

    /// Two caches on one directory (spelt differently, through a link) share one store: its
    /// size limit holds for both together.
    func testCachesOnOneDirectoryShareOneStoreAndItsLimit() async throws {
        let directory = root.appendingPathComponent("shared")
        let link = root.appendingPathComponent("link")
        let first = ResponseCache(memoryCapacity: 0, diskCapacity: 100_000, directory: directory)
        // A link above the directory (a link as its last component is refused).
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: root)
        let second = ResponseCache(
            memoryCapacity: 0, diskCapacity: 200_000, directory: link.appendingPathComponent("shared"))
        XCTAssertEqual(first.diskCapacity, 100_000)
        XCTAssertEqual(second.diskCapacity, 100_000, "the smallest capacity asked for")
        let memoryOnly = ResponseCache(diskCapacity: 0, directory: directory)
        XCTAssertEqual(memoryOnly.diskCapacity, 0)
        XCTAssertEqual(first.diskCapacity, 100_000, "a cache without disk capacity does not shrink the shared store")
        let one = manager(first), two = manager(second)
        for index in 0..<8 {
            _ = try await get(index.isMultiple(of: 2) ? one : two, "/item\(index)")
            // A completion does not wait for the store (the cache's queue writes it after), and
            // the limit and "/item7" checks below need every write done.
            let request = URLRequest(url: try server.url("/item\(index)"))
            try await eventually({ first.cachedResponse(for: request) != nil }, "item\(index) stored")
        }
        try await eventually({ first.currentDiskUsage == second.currentDiskUsage }, "one store")
        XCTAssertLessThanOrEqual(try totalSize(directory), 100_000, "the limit holds across both caches")
        XCTAssertGreaterThan(try totalSize(directory), 60_000)
        // Either cache answers what the other stored.
        let fromOther = try await get(one, "/item7")
        XCTAssertNil(fromOther.metrics)
        XCTAssertEqual(server.requests.filter { $0.path == "/item7" }.count, 1)
        withExtendedLifetime((one, two)) {}
    }

    // MARK: - Planted links and untrusted parents (issue 19 review, item A)

    /// Another user pre-creates the predictable cache path as a link to a directory the victim
    /// owns: the link is refused, and the directory it points to is neither narrowed nor
    /// emptied.
    func testASymbolicLinkAsTheDirectoryIsRefusedAndItsTargetUntouched() async throws {
        let victim = root.appendingPathComponent("victim")
        XCTAssertEqual(mkdir(victim.path, 0o755), 0)
        XCTAssertEqual(chmod(victim.path, 0o755), 0)
        let kept = victim.appendingPathComponent("report.cache")
        let temporary = victim.appendingPathComponent(".draft.tmp")
        try Data("mine".utf8).write(to: kept)
        try Data("mine too".utf8).write(to: temporary)
        let link = root.appendingPathComponent("ImageDownloader")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: victim)
        XCTAssertEqual(lchown(link.path, 65534, 65534), 0, "the link is the other user's")
        let cache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 10, directory: link)
        XCTAssertEqual(cache.diskStoreError, .directoryIsSymbolicLink(path: link.path))
        XCTAssertEqual(cache.diskCapacity, 0)
        XCTAssertEqual(cache.currentDiskUsage, 0)
        XCTAssertEqual(try mode(victim), 0o755, "the link's target is not narrowed")
        XCTAssertTrue(FileManager.default.fileExists(atPath: kept.path), "nothing evicted there")
        XCTAssertTrue(FileManager.default.fileExists(atPath: temporary.path), "nothing cleaned there")
        let manager = manager(cache)
        _ = try await get(manager, "/item0")
        let again = try await get(manager, "/item0")
        XCTAssertNil(again.metrics, "the memory cache still works")
        XCTAssertEqual(try files(victim).count, 2, "nothing written through the link")
    }

    /// A directory above the cache's that belongs to another user: they could replace the
    /// cache directory at will. Refused before anything is created below it.
    func testAParentOwnedByAnotherUserIsRefused() throws {
        let parent = root.appendingPathComponent("theirs")
        XCTAssertEqual(mkdir(parent.path, 0o755), 0)
        XCTAssertEqual(chown(parent.path, 65534, 65534), 0)
        let directory = parent.appendingPathComponent("cache")
        let cache = ResponseCache(directory: directory)
        XCTAssertEqual(cache.diskStoreError, .untrustedParentDirectory(path: parent.path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path), "nothing created in it")
    }

    /// A parent anyone may write to, without the sticky bit: anyone could rename the cache
    /// directory away and put their own in its place.
    func testAWorldWritableParentWithoutTheStickyBitIsRefused() throws {
        let parent = root.appendingPathComponent("open")
        XCTAssertEqual(mkdir(parent.path, 0o777), 0)
        XCTAssertEqual(chmod(parent.path, 0o777), 0)
        let directory = parent.appendingPathComponent("cache")
        XCTAssertEqual(mkdir(directory.path, 0o700), 0, "even the user's own directory there")
        let cache = ResponseCache(directory: directory)
        XCTAssertEqual(cache.diskStoreError, .untrustedParentDirectory(path: parent.path))
        XCTAssertEqual(cache.diskCapacity, 0)
    }

    /// A /tmp-like parent (world-writable with the sticky bit: nobody renames or removes
    /// another's entries) holding the user's own directory is accepted.
    func testTheUsersDirectoryInAStickyWorldWritableParentIsAccepted() async throws {
        let parent = root.appendingPathComponent("tmp")
        XCTAssertEqual(mkdir(parent.path, 0o777), 0)
        XCTAssertEqual(chmod(parent.path, 0o1777), 0)
        let directory = parent.appendingPathComponent("curlew")
        let cache = ResponseCache(directory: directory)
        XCTAssertNil(cache.diskStoreError)
        _ = try await get(manager(cache), "/item0")
        try await eventually({ (try? self.files(directory).count) == 1 }, "stored on disk")
        XCTAssertEqual(try mode(directory), 0o700)
    }

    /// The user's own directory that others may write to may hold their planted answers:
    /// refused, and its mode left as it is.
    func testAnExistingDirectoryWritableByOthersIsRefusedNotChanged() throws {
        let directory = root.appendingPathComponent("groupwritable")
        XCTAssertEqual(mkdir(directory.path, 0o770), 0)
        XCTAssertEqual(chmod(directory.path, 0o770), 0)
        let cache = ResponseCache(directory: directory)
        XCTAssertEqual(cache.diskStoreError, .directoryWritableByOthers(path: directory.path, mode: 0o770))
        XCTAssertEqual(try mode(directory), 0o770, "not Curlew's to change")
    }

    // MARK: - Entries that are not the store's own (item B)

    /// An entry-named link to a file outside, and an entry-named file of another user's: the
    /// store neither follows the link nor narrows (or answers with) the foreign file.
    func testEntryNamedLinksAndForeignFilesAreNotChmoddedOrUsed() throws {
        let directory = root.appendingPathComponent("entries")
        XCTAssertEqual(mkdir(directory.path, 0o700), 0)
        let outside = root.appendingPathComponent("outside.txt")
        try Data("outside".utf8).write(to: outside)
        XCTAssertEqual(chmod(outside.path, 0o644), 0)
        try FileManager.default.createSymbolicLink(
            at: directory.appendingPathComponent("0123456789abcdef.cache"), withDestinationURL: outside)
        let foreign = directory.appendingPathComponent("fedcba9876543210.cache")
        try Data("planted".utf8).write(to: foreign)
        XCTAssertEqual(chown(foreign.path, 65534, 65534), 0)
        XCTAssertEqual(chmod(foreign.path, 0o644), 0)
        let cache = ResponseCache(directory: directory)
        XCTAssertNil(cache.diskStoreError)
        XCTAssertEqual(cache.currentDiskUsage, 0, "neither counts as an entry")
        XCTAssertEqual(try mode(outside), 0o644, "the link's target is not chmodded")
        XCTAssertEqual(try mode(foreign), 0o644, "another user's file is not chmodded")
        XCTAssertEqual(try Data(contentsOf: outside), Data("outside".utf8))
    }
}
