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
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: directory)
        let second = ResponseCache(memoryCapacity: 0, diskCapacity: 200_000, directory: link.appendingPathComponent("."))
        XCTAssertEqual(first.diskCapacity, 100_000)
        XCTAssertEqual(second.diskCapacity, 100_000, "the smallest capacity asked for")
        let memoryOnly = ResponseCache(diskCapacity: 0, directory: directory)
        XCTAssertEqual(memoryOnly.diskCapacity, 0)
        XCTAssertEqual(first.diskCapacity, 100_000, "a cache without disk capacity does not shrink the shared store")
        let one = manager(first), two = manager(second)
        for index in 0..<8 {
            _ = try await get(index.isMultiple(of: 2) ? one : two, "/item\(index)")
            try await eventually({ first.currentDiskUsage > 0 }, "stored")
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
}
