import CurlewTestSupport
import Foundation
import SessionCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// Sends every request to its URL's `?variant=small` form: the task's URL is not the caller's.
struct SmallVariantAdapter: RequestAdapter {
    func adapt(_ request: URLRequest, attempt: Int) -> URLRequest {
        guard let url = request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return request }
        components.queryItems = [URLQueryItem(name: "variant", value: "small")]
        var adapted = request
        adapted.url = components.url
        return adapted
    }
}

/// Cancelling through the downloader, the prefetcher and the bindings when the manager's
/// `RequestAdapter` rewrites URLs (issue 19, #9): the receipt is found by its task, not by the
/// task's (adapted) URL. The slow route's delay only keeps the transfer open until the cancel;
/// nothing asserts on time.
final class ImageDownloaderAdaptedURLTests: XCTestCase {
    private var server: TestServer!
    private var downloader: ImageDownloader!
    private var picture: Image!

    override func setUp() async throws {
        server = try TestServer()
        picture = try TestImages.image(width: 3, height: 2, value: 9)
        server.route("/slow", response: TestImages.response(picture, delay: .seconds(3)))
        server.route("/quick", response: TestImages.response(picture, delay: .milliseconds(300)))
        downloader = TestImages.downloader()
        downloader.sessionManager.requestAdapter = SmallVariantAdapter()
    }

    override func tearDown() async throws {
        RecordingImageView.sharedImageDownloader = .defaultInstance
        await shutDown(downloader)
        server.shutdown()
    }

    private func outcome(_ recorder: Recorder<String>) -> (ImageDownloader.SuccessHandler, ImageDownloader.FailureHandler) {
        ({ _, _, _ in recorder.append("image") },
         { _, _, error in recorder.append((error as? SessionError) == .cancelled ? "cancelled" : "\(error)") })
    }

    /// Waits until the (adapted) request for `path` reached the server: the cancel then
    /// arrives while the transfer is in flight.
    private func waitForAdaptedRequest(_ path: String) async throws {
        try await eventually({ server.requestCount(path) == 1 }, "the request reached the server")
        XCTAssertEqual(server.requests.first { $0.path == path }?.query, "variant=small", "the adapter rewrote the URL")
    }

    func testCancellingTheReceiptOfAnAdaptedDownloadCancelsTheTransfer() async throws {
        let url = try server.url("/slow")
        let outcomes = Recorder<String>()
        let (success, failure) = outcome(outcomes)
        let receipt = try XCTUnwrap(downloader.downloadImage(for: URLRequest(url: url), success: success, failure: failure))
        try await waitForAdaptedRequest("/slow")
        // Adapters run when the task starts (they may be async): by the time the request is
        // on the wire, the task's original request is the adapted one.
        XCTAssertEqual(receipt.task.originalRequest?.url?.query, "variant=small")

        downloader.cancelTask(for: receipt)
        try await eventually({ receipt.task.state == .completed }, "the transfer ends")
        XCTAssertEqual(receipt.task.error as? SessionError, .cancelled, "the transfer itself was cancelled")
        try await eventually({ outcomes.count == 1 }, "the receipt is told")
        XCTAssertEqual(outcomes.values, ["cancelled"], "the cancellation, never the image")
        try await eventually({ server.connections.allSatisfy(\.isClosed) }, "the server saw the connection closed")
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "nothing left behind")
        XCTAssertNil(downloader.imageCache?.image(for: URLRequest(url: url), withAdditionalIdentifier: nil))
        XCTAssertEqual(outcomes.values, ["cancelled"])
    }

    func testCancellingOneOfTwoMergedAdaptedReceiptsAndTheCacheKey() async throws {
        let url = try server.url("/quick")
        let first = Recorder<String>(), second = Recorder<String>()
        let (firstSuccess, firstFailure) = outcome(first)
        let (secondSuccess, secondFailure) = outcome(second)
        let cancelled = try XCTUnwrap(downloader.downloadImage(for: URLRequest(url: url), success: firstSuccess, failure: firstFailure))
        let kept = try XCTUnwrap(downloader.downloadImage(for: URLRequest(url: url), success: secondSuccess, failure: secondFailure))
        XCTAssertTrue(cancelled.task === kept.task, "requests for the caller's URL merge")

        downloader.cancelTask(for: cancelled)
        try await eventually({ second.count == 1 }, "the other receipt completes")
        XCTAssertEqual(second.values, ["image"])
        XCTAssertNil(kept.task.error, "the shared transfer was not cancelled")
        try await eventually({ first.count == 1 }, "the cancelled receipt is told")
        XCTAssertEqual(first.values, ["cancelled"], "the cancelled receipt never gets the image")
        XCTAssertEqual(server.requestCount("/quick"), 1, "one transfer")

        // Cached under the caller's URL (what callers and bindings look up), not the adapted one.
        let adapted = try XCTUnwrap(kept.task.originalRequest)
        XCTAssertNotNil(downloader.imageCache?.image(for: URLRequest(url: url), withAdditionalIdentifier: nil))
        XCTAssertNil(downloader.imageCache?.image(for: adapted, withAdditionalIdentifier: nil))
        let again = Recorder<String>()
        let (againSuccess, againFailure) = outcome(again)
        XCTAssertNil(downloader.downloadImage(for: URLRequest(url: url), success: againSuccess, failure: againFailure),
                     "served from the cache")
        try await eventually({ again.count == 1 }, "the cached image")
        XCTAssertEqual(again.values, ["image"])
        XCTAssertEqual(server.requestCount("/quick"), 1)
    }

    func testStoppingAnAdaptedPrefetchCancelsItsTransfer() async throws {
        let prefetcher = ImagePrefetcher(downloader: downloader, maximumConcurrentPrefetches: 1)
        let url = try server.url("/slow")
        prefetcher.startPrefetching(for: [url])
        let task = try XCTUnwrap(downloader.sessionManager.tasks.first)
        try await waitForAdaptedRequest("/slow")

        prefetcher.stopPrefetching(for: [url])
        XCTAssertTrue(prefetcher.prefetchCounts == (0, 0))
        try await eventually({ task.state == .completed }, "the transfer ends")
        XCTAssertEqual(task.error as? SessionError, .cancelled, "the transfer was cancelled, not left running")
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "nothing left behind")
        XCTAssertNil(downloader.imageCache?.image(for: URLRequest(url: url), withAdditionalIdentifier: nil))
    }

    func testCancellingAnAdaptedBindingCancelsItsTransfer() async throws {
        RecordingImageView.sharedImageDownloader = downloader
        let view = RecordingImageView()
        let queue = DispatchQueue(label: "adapted-url-tests.ui")
        view.setImage(with: try server.url("/slow"), on: queue)
        let task = try XCTUnwrap(downloader.sessionManager.tasks.first)
        try await waitForAdaptedRequest("/slow")

        view.cancelImageDownloadTask()
        try await eventually({ task.state == .completed }, "the transfer ends")
        XCTAssertEqual(task.error as? SessionError, .cancelled, "the transfer was cancelled, not left running")
        queue.sync {}
        XCTAssertEqual(view.history, [], "no image shown")
    }
}
