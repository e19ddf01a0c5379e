import CurlewTestSupport
import Foundation
import ImageLoading
import SessionCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Image downloaders whose managers keep their response caches in the same directory (as
/// every default manager does, in ``ImageDownloader/defaultResponseCacheDirectory``) share
/// one disk store, so its size limit holds for all of them together.
final class ImageDownloaderDiskCacheTests: XCTestCase {
    private var server: TestServer!
    private var directory: URL!

    override func setUp() async throws {
        server = try TestServer()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-images-\(UUID().uuidString)")
        let picture = try TestImages.image(width: 60, height: 125, value: 9)  // 30,000 bytes
        for index in 0..<8 {
            var response = TestImages.response(picture)
            response.headers.append(("Cache-Control", "max-age=600"))
            server.route("/image\(index)", response: response)
        }
    }

    override func tearDown() async throws {
        server.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }

    private func downloader(diskCapacity: Int) -> (ImageDownloader, ResponseCache) {
        var configuration = SessionConfiguration.default
        let cache = ResponseCache(memoryCapacity: 0, diskCapacity: diskCapacity, directory: directory)
        configuration.responseCache = cache
        let manager = HTTPSessionManager(baseURL: nil, configuration: configuration)
        manager.responseSerializer = RawImageSerializer()
        return (ImageDownloader(sessionManager: manager, imageCache: nil), cache)
    }

    func testTwoDownloadersOnOneDirectoryShareItsSizeLimit() async throws {
        let (first, firstCache) = downloader(diskCapacity: 100_000)
        let (second, secondCache) = downloader(diskCapacity: 100_000)
        let delivered = Recorder<Int>()
        for index in 0..<8 {
            let downloader = index.isMultiple(of: 2) ? first : second
            downloader.downloadImage(
                for: URLRequest(url: try server.url("/image\(index)")),
                success: { _, _, _ in delivered.append(index) }, failure: { _, _, error in XCTFail("\(error)") })
            try await eventually({ delivered.count == index + 1 }, "image \(index) delivered")
        }
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.fileSizeKey])
        let total = try files.reduce(0) { $0 + (try $1.resourceValues(forKeys: [.fileSizeKey]).fileSize ?? 0) }
        XCTAssertLessThanOrEqual(total, 100_000, "one store, one limit, for both downloaders")
        XCTAssertGreaterThan(total, 60_000)
        XCTAssertEqual(firstCache.currentDiskUsage, secondCache.currentDiskUsage)
        await shutDown(first)
        await shutDown(second)
    }

    // MARK: - The default directory (issue 19 review, item A)

    /// Sets `HOME` and `XDG_CACHE_HOME` (nil: unset) while `body` runs.
    private func withEnvironment(home: String?, cacheHome: String?, _ body: () throws -> Void) rethrows {
        let names: [String] = ["HOME", "XDG_CACHE_HOME"]
        let saved = names.map { name -> (String, String?) in (name, getenv(name).map { String(cString: $0) }) }
        defer {
            for (name, value) in saved {
                if let value { setenv(name, value, 1) } else { unsetenv(name) }
            }
        }
        for (name, value) in zip(names, [home, cacheHome]) {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
        try body()
    }

    /// Without a cache directory of the user's there is no shared fallback (a predictable
    /// /tmp path another user could plant first): the default manager caches in memory only.
    func testWithoutHomeOrXDGCacheHomeTheDefaultManagerKeepsToMemory() throws {
        try withEnvironment(home: nil, cacheHome: nil) {
            XCTAssertNil(ImageDownloader.defaultResponseCacheDirectory as URL?)
            let manager = ImageDownloader.makeDefaultSessionManager()
            let cache = try XCTUnwrap(manager.configuration.responseCache, "the memory cache stays")
            XCTAssertNil(cache.directory)
            XCTAssertEqual(cache.diskCapacity, 0)
            XCTAssertNil(cache.diskStoreError)
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
        }
    }

    /// The default manager fetches URLs from content nobody vetted: a collected body is
    /// limited (an endless one filled the memory) and a transfer lasts minutes, not the 7
    /// days a dripping server could hold a download slot for. Over the limit, the download
    /// fails with the limit's error (a real transfer on loopback).
    func testTheDefaultManagerLimitsBodiesAndTransferTime() async throws {
        var made: HTTPSessionManager?
        withEnvironment(home: nil, cacheHome: nil) { made = ImageDownloader.makeDefaultSessionManager() }
        let manager = try XCTUnwrap(made)
        XCTAssertEqual(manager.configuration.maximumCollectedBodyBytes, 64 << 20)
        XCTAssertEqual(manager.configuration.timeoutIntervalForResource, 300)
        // 65 MiB of one shared 64 KiB piece, chunked (no length to refuse up front).
        let piece = Data(repeating: 0x41, count: 64 << 10)
        var endless = TestResponse(status: 200, headers: [("Content-Type", "image/png")])
        endless.body = .stream(Array(repeating: TestResponse.Chunk(piece, delay: .zero), count: 1040))
        endless.framing = .chunked
        server.route("/endless.png", response: endless)
        do {
            _ = try await manager.data(for: URLRequest(url: try server.url("/endless.png")))
            XCTFail("a 65 MiB body was collected")
        } catch let error as SessionError {
            XCTAssertEqual(error, .responseBodyTooLarge(limit: 64 << 20))
        }
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testTheDefaultDirectoryIsUnderXDGCacheHomeElseHome() {
        withEnvironment(home: "/home/someone", cacheHome: directory.path) {
            XCTAssertEqual(
                (ImageDownloader.defaultResponseCacheDirectory as URL?)?.path,
                directory.appendingPathComponent("curlew/ImageDownloader").path)
        }
        withEnvironment(home: "/home/someone", cacheHome: nil) {
            XCTAssertEqual(
                (ImageDownloader.defaultResponseCacheDirectory as URL?)?.path, "/home/someone/.cache/curlew/ImageDownloader")
        }
    }
}
