import CurlewTestSupport
import Foundation
import Serialization
import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// The downloader and the bindings with their real default pipeline (`ImageResponseSerializer`)
/// against httpbin's images: pig_icon.png is 100×100, jackal.jpg 239×178.
final class ImageDownloaderHTTPBinTests: XCTestCase {
    private func url(_ path: String) throws -> URL {
        try HTTPBin.baseURL.appendingPathComponent(path)
    }

    func testTheDefaultPipelineDecodesAndCachesRealImages() async throws {
        let cache = AutoPurgingImageCache()
        let downloader = ImageDownloader(imageCache: cache)
        XCTAssertTrue(downloader.sessionManager.responseSerializer is ImageResponseSerializer)
        let sizes = Recorder<String>()
        for path in ["image/png", "image/jpeg"] {
            downloader.downloadImage(for: URLRequest(url: try url(path)), success: { request, response, image in
                XCTAssertEqual(response?.statusCode, 200)
                sizes.append("\(request.url?.lastPathComponent ?? "?") \(image.width)x\(image.height)")
            }, failure: { _, _, error in sizes.append("\(error)") })
        }
        try await eventually({ sizes.count == 2 }, "both downloaded")
        XCTAssertEqual(Set(sizes.values), ["png 100x100", "jpeg 239x178"])
        XCTAssertEqual(cache.memoryUsage, 100 * 100 * 4 + 239 * 178 * 4, "exactly the two decoded bitmaps")
        XCTAssertEqual(cache.image(for: URLRequest(url: try url("image/png")), withAdditionalIdentifier: nil)?.width, 100)
        downloader.sessionManager.invalidateSessionCancelingTasks(true, resetSession: false)
        await downloader.sessionManager.waitUntilInvalidated()
    }

    func testAnSVGFailsWithAClearError() async throws {
        let downloader = ImageDownloader(imageCache: nil)
        let errors = Recorder<String>()
        var serializer = ImageResponseSerializer()
        serializer.acceptableContentTypes = nil  // let the body reach the decoder
        downloader.sessionManager.responseSerializer = serializer
        downloader.downloadImage(for: URLRequest(url: try url("image/svg")), success: { _, _, _ in errors.append("decoded?") },
                                 failure: { _, _, error in errors.append("\(error)") })
        try await eventually({ errors.count == 1 }, "failed")
        XCTAssertEqual(errors.values.first?.contains("SVG"), true, "\(errors.values)")
        downloader.sessionManager.invalidateSessionCancelingTasks(true, resetSession: false)
        await downloader.sessionManager.waitUntilInvalidated()
    }

    func testABindingShowsARealImage() async throws {
        let downloader = ImageDownloader()
        HTTPBinImageView.sharedImageDownloader = downloader
        defer { HTTPBinImageView.sharedImageDownloader = .defaultInstance }
        let view = HTTPBinImageView()
        view.setImage(with: try url("image/jpeg"), on: DispatchQueue(label: "httpbin-binding"))
        try await eventually({ view.image != nil }, "shown")
        XCTAssertEqual(view.image?.width, 239)
        XCTAssertEqual(view.image?.height, 178)
        downloader.sessionManager.invalidateSessionCancelingTasks(true, resetSession: false)
        await downloader.sessionManager.waitUntilInvalidated()
    }
}

/// A view type of its own, so that setting its downloader touches no other test.
final class HTTPBinImageView: ImageDisplaying, @unchecked Sendable {
    // @unchecked: `stored` is a Mutex.
    private let stored = Mutex<Image?>(nil)
    var image: Image? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
