import CurlewTestSupport
import Foundation
import ImageLoading
import SessionCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
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
}
