import CurlewTestSupport
import Foundation
import SessionCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// `ImagePrefetcher`: warms the downloader's cache, at low priority, a bounded number at once,
/// sharing transfers with the downloader's other callers.
final class ImagePrefetcherTests: XCTestCase {
    private var server: TestServer!
    private var downloader: ImageDownloader!
    private var picture: Image!

    override func setUp() async throws {
        server = try TestServer()
        picture = try TestImages.image(value: 5)
        for index in 0..<6 {
            server.route("/p\(index)", response: TestImages.response(picture, delay: .milliseconds(100)))
        }
        downloader = TestImages.downloader()
    }

    override func tearDown() async throws {
        await shutDown(downloader)
        server.shutdown()
    }

    private func urls(_ indices: Range<Int>) throws -> [URL] { try indices.map { try server.url("/p\($0)") } }

    private func isCached(_ url: URL) -> Bool {
        downloader.imageCache?.image(for: URLRequest(url: url), withAdditionalIdentifier: nil) != nil
    }

    func testPrefetchingFillsTheCacheAFewAtATime() async throws {
        let prefetcher = ImagePrefetcher(downloader: downloader, maximumConcurrentPrefetches: 2)
        let targets = try urls(0..<6)
        prefetcher.startPrefetching(for: targets + targets)  // duplicates are ignored
        XCTAssertTrue(prefetcher.prefetchCounts == (4, 2), "two running, four waiting")
        XCTAssertLessThanOrEqual(downloader.pendingDownloadCount.merged, 2, "never more than two at the downloader")
        try await eventually({ targets.allSatisfy(isCached) }, "all six cached")
        try await eventually({ prefetcher.prefetchCounts == (0, 0) }, "the prefetcher is idle")
        XCTAssertEqual(server.requests.count, 6, "one transfer per URL")
        XCTAssertTrue(server.requests.allSatisfy { $0.header("Accept") == "image/*" })

        // Cached URLs cost nothing the second time.
        prefetcher.startPrefetching(for: targets)
        try await eventually({ prefetcher.prefetchCounts == (0, 0) }, "done at once")
        XCTAssertEqual(server.requests.count, 6)
    }

    func testPrefetchTransfersRunAtLowPriorityAndMergeWithTheDownloader() async throws {
        let prefetcher = ImagePrefetcher(downloader: downloader, maximumConcurrentPrefetches: 1)
        let target = try server.url("/p0")
        prefetcher.startPrefetching(for: [target])
        let task = try XCTUnwrap(downloader.sessionManager.tasks.first)
        XCTAssertEqual(task.priority, 0.1, accuracy: 0.0001)
        // A view asking for the same image joins the prefetch and lifts it.
        let delivered = Recorder<Image>()
        let receipt = downloader.downloadImage(for: URLRequest(url: target), success: { _, _, image in delivered.append(image) })
        XCTAssertTrue(receipt?.task === task, "the same transfer")
        XCTAssertEqual(task.priority, 0.5, accuracy: 0.0001)
        try await eventually({ delivered.count == 1 }, "the view got its image")
        XCTAssertEqual(server.requests.count, 1, "no duplicate transfer")
    }

    /// A view that joined a running prefetch keeps its download when the prefetch is stopped
    /// (the list scrolled on): only the prefetcher's own receipt is withdrawn.
    func testStoppingAPrefetchAViewJoinedKeepsTheViewsDownload() async throws {
        let prefetcher = ImagePrefetcher(downloader: downloader, maximumConcurrentPrefetches: 1)
        let target = try server.url("/p1")
        prefetcher.startPrefetching(for: [target])
        let delivered = Recorder<Image>()
        let failed = Recorder<String>()
        let receipt = downloader.downloadImage(
            for: URLRequest(url: target), success: { _, _, image in delivered.append(image) },
            failure: { _, _, error in failed.append("\(error)") })
        XCTAssertNotNil(receipt?.task)
        prefetcher.stopPrefetching(for: [target])
        try await eventually({ delivered.count + failed.count == 1 }, "the view heard back")
        XCTAssertEqual(delivered.count, 1, "the view's download was cancelled with the prefetch: \(failed.values)")
        XCTAssertEqual(server.requestCount("/p1"), 1)
    }

    func testStoppingWithdrawsQueuedAndRunningPrefetches() async throws {
        let prefetcher = ImagePrefetcher(downloader: downloader, maximumConcurrentPrefetches: 2)
        let targets = try urls(0..<6)
        prefetcher.startPrefetching(for: targets)
        prefetcher.stopPrefetching(for: [targets[0], targets[5]])  // one running, one waiting
        XCTAssertTrue(prefetcher.prefetchCounts == (2, 2), "p2 took the freed slot; p3 and p4 wait")
        prefetcher.stopPrefetchingAll()
        XCTAssertTrue(prefetcher.prefetchCounts == (0, 0))
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "every transfer withdrawn")
        XCTAssertEqual(server.requestCount("/p5"), 0, "a waiting prefetch never started")
        XCTAssertFalse(isCached(targets[0]), "the running prefetch was cancelled")
    }
}
