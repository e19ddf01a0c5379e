import CurlewTestSupport
import Foundation
import ImageLoading
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A binding's load probes the image cache once, hit or miss (issue 20: the downloader used to
/// probe it a second time on a miss), and loads of one URL still share one transfer.
final class ImageCacheProbeTests: XCTestCase {
    private var server: TestServer!
    private var cache: ProbeCountingImageCache!
    private var downloader: ImageDownloader!
    private var picture: Image!
    private let queue = DispatchQueue(label: "image-cache-probe-tests.ui")

    override func setUp() async throws {
        server = try TestServer()
        picture = try TestImages.image(value: 5)
        // Slow enough that the second view's load finds the first one's transfer running.
        server.route("/picture", response: TestImages.response(picture, delay: .milliseconds(300)))
        cache = ProbeCountingImageCache()
        downloader = TestImages.downloader(cache: cache)
        ProbeCountingImageView.sharedImageDownloader = downloader
    }

    override func tearDown() async throws {
        ProbeCountingImageView.sharedImageDownloader = .defaultInstance
        await shutDown(downloader)
        server.shutdown()
    }

    func testAMissIsProbedOnceAndAHitServedAtOnce() async throws {
        let url = try server.url("/picture")
        let view = ProbeCountingImageView()
        view.setImage(with: url, on: queue)
        XCTAssertEqual(cache.probes, 1, "the miss: one probe, by the binding")
        try await eventually({ view.image == picture }, "the image arrives")
        XCTAssertEqual(cache.probes, 1, "and none after")

        let again = ProbeCountingImageView()
        again.setImage(with: url, on: queue)
        XCTAssertEqual(again.image, picture, "a hit is shown before the call returns")
        XCTAssertEqual(cache.probes, 2)
        XCTAssertEqual(server.requestCount("/picture"), 1)
    }

    func testTwoLoadsOfOneURLShareOneTransfer() async throws {
        let url = try server.url("/picture")
        let views = [ProbeCountingImageView(), ProbeCountingImageView()]
        for view in views { view.setImage(with: url, on: queue) }
        XCTAssertEqual(cache.probes, 2, "one probe per load")
        try await eventually({ views.allSatisfy { $0.image == picture } }, "both views get the image")
        XCTAssertEqual(server.requestCount("/picture"), 1, "the second load joined the first one's transfer")
        XCTAssertEqual(cache.probes, 2)
    }

    func testTheDownloaderAloneStillProbesOnce() async throws {
        let url = try server.url("/picture")
        let done = Recorder<Bool>()
        downloader.downloadImage(for: URLRequest(url: url), success: { _, _, _ in done.append(true) })
        try await eventually({ done.count == 1 }, "the image arrives")
        XCTAssertEqual(cache.probes, 1)
        downloader.downloadImage(for: URLRequest(url: url), success: { _, response, _ in done.append(response == nil) })
        try await eventually({ done.count == 2 }, "the hit is delivered")
        XCTAssertEqual(done.values, [true, true], "the second came from the cache, without a response")
        XCTAssertEqual(cache.probes, 2)
    }
}

/// A view type of its own, so that its shared downloader is this suite's alone.
final class ProbeCountingImageView: ImageDisplaying, @unchecked Sendable {
    // @unchecked: `shown` is a Mutex; the view has no other state.
    private let shown = Mutex<Image?>(nil)
    var image: Image? {
        get { shown.withLock { $0 } }
        set { shown.withLock { $0 = newValue } }
    }
}
