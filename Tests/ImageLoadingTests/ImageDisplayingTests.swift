import CurlewTestSupport
import Foundation
import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// An image view of some toolkit, recording every image it was given.
final class RecordingImageView: ImageDisplaying, @unchecked Sendable {
    // @unchecked: `shown` is a Mutex; the view has no other state.
    private let shown = Mutex<[Image?]>([])
    var image: Image? {
        get { shown.withLock { $0.last ?? nil } }
        set { shown.withLock { $0.append(newValue) } }
    }
    /// Every image set, in order.
    var history: [Image?] { shown.withLock { $0 } }
}

/// The `UIImageView+AFNetworking` semantics of `ImageDisplaying`, against the in-process server.
final class ImageDisplayingTests: XCTestCase {
    private var server: TestServer!
    private var downloader: ImageDownloader!
    private var picture: Image!
    private var other: Image!
    private var placeholder: Image!
    /// The queue results are delivered on (the main queue is tested on its own).
    private let queue = DispatchQueue(label: "image-displaying-tests.ui")

    override func setUp() async throws {
        server = try TestServer()
        picture = try TestImages.image(value: 1)
        other = try TestImages.image(value: 2)
        placeholder = try TestImages.image(value: 3)
        server.route("/picture", response: TestImages.response(picture, delay: .milliseconds(200)))
        server.route("/other", response: TestImages.response(other))
        server.route("/missing", response: .text("no", status: 404))
        downloader = TestImages.downloader()
        RecordingImageView.sharedImageDownloader = downloader
    }

    override func tearDown() async throws {
        RecordingImageView.sharedImageDownloader = .defaultInstance
        SubclassedImageView.sharedImageDownloader = .defaultInstance
        await shutDown(downloader)
        server.shutdown()
    }

    private func url(_ path: String) throws -> URL { try server.url(path) }

    func testSharedDownloaderIsPerType() {
        XCTAssertTrue(RecordingImageView.sharedImageDownloader === downloader)
        XCTAssertTrue(OtherImageView.sharedImageDownloader === ImageDownloader.defaultInstance, "another type keeps the default")
    }

    func testASubclassHeldAsItsBaseTypeUsesItsOwnDownloader() async throws {
        // AFNetworking asks `[self class]`: the object's real class, not the variable's type.
        SubclassedImageView.sharedImageDownloader = downloader
        XCTAssertTrue(BaseImageView.sharedImageDownloader === ImageDownloader.defaultInstance)
        let view: BaseImageView = SubclassedImageView()
        let url = try url("/other")
        view.setImage(with: url, on: queue)
        // The default downloader (the base type's) would decode the raw test body as PNG/JPEG
        // and fail; only the subclass's downloader, with its raw serializer, shows the image.
        try await eventually({ view.history.count == 1 }, "the image arrives")
        XCTAssertEqual(view.history, [other])
        XCTAssertEqual(server.requestCount("/other"), 1)
        XCTAssertNotNil(downloader.imageCache?.image(for: URLRequest(url: url), withAdditionalIdentifier: nil),
                        "it went through the subclass's downloader")
    }

    func testPlaceholderNowImageWhenDone() async throws {
        let view = RecordingImageView()
        view.setImage(with: try url("/picture"), placeholderImage: placeholder, on: queue)
        XCTAssertEqual(view.history, [placeholder], "the placeholder is set before the call returns")
        try await eventually({ view.history.count == 2 }, "the image arrives")
        XCTAssertEqual(view.history, [placeholder, picture])
        XCTAssertEqual(server.requests.first?.header("Accept"), "image/*")
        XCTAssertEqual(ImageBindingRegistry.activeDownloadCount(of: view), 0, "the finished download is forgotten")
    }

    func testWithoutPlaceholderTheImageIsLeftAloneUntilDone() async throws {
        let view = RecordingImageView()
        view.image = other
        view.setImage(with: try url("/picture"), on: queue)
        XCTAssertEqual(view.history, [other])
        try await eventually({ view.history.count == 2 }, "the image arrives")
        XCTAssertEqual(view.history.last, picture)
    }

    func testACachedImageIsSetSynchronouslyWithoutARequest() throws {
        let view = RecordingImageView()
        let request = URLRequest(url: try url("/picture"))
        downloader.imageCache?.add(picture, for: request, withAdditionalIdentifier: nil)
        view.setImage(withURLRequest: request, placeholderImage: placeholder, on: queue)
        XCTAssertEqual(view.history, [picture], "set at once, no placeholder first")
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertEqual(ImageBindingRegistry.activeDownloadCount(of: view), 0)
    }

    func testTheSameURLAlreadyActiveIsANoOp() async throws {
        let view = RecordingImageView()
        view.setImage(with: try url("/picture"), placeholderImage: placeholder, on: queue)
        let active = ImageBindingRegistry.activeDownloadCount(of: view)
        view.setImage(with: try url("/picture"), placeholderImage: other, on: queue)
        XCTAssertEqual(view.history, [placeholder], "the second call did not even set its placeholder")
        XCTAssertEqual(active, 1)
        try await eventually({ view.history.count == 2 }, "the image arrives once")
        try await Task.sleep(nanoseconds: 50_000_000)
        queue.sync {}
        XCTAssertEqual(view.history, [placeholder, picture])
        XCTAssertEqual(server.requests.count, 1)
    }

    /// A refresh (`Cache-Control: no-cache`) of the URL a view is loading is a load of its
    /// own: it replaces the plain one and reaches the server. It was taken for the same load
    /// and dropped (the view kept what the plain load brought).
    func testARefreshOfTheURLBeingLoadedIsALoadOfItsOwn() async throws {
        let view = RecordingImageView()
        view.setImage(with: try url("/picture"), placeholderImage: placeholder, on: queue)
        var refresh = URLRequest(url: try url("/picture"))
        refresh.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
        view.setImage(withURLRequest: refresh, placeholderImage: other, on: queue)
        XCTAssertEqual(view.history, [placeholder, other], "the refresh set its placeholder: a load of its own")
        try await eventually({ view.history.count == 3 }, "the refresh's image arrives")
        XCTAssertEqual(view.history.last, picture)
        XCTAssertTrue(server.requests.contains { $0.header("cache-control") == "no-cache" }, "the refresh reached the server")
    }

    /// A view asking again for the URL it is loading after the downloader's credentials
    /// changed (a sign-in, a sign-out) starts a load of its own, as the downloader would not
    /// merge them: it was taken for the same load and dropped, and the view was shown what the
    /// earlier credentials brought (after a sign-out: what they unlocked).
    func testALoadAfterTheCredentialsChangedIsALoadOfItsOwn() async throws {
        let view = RecordingImageView()
        view.setImage(with: try url("/picture"), placeholderImage: placeholder, on: queue)
        try downloader.setCredential(URLCredential(user: "alice", password: "pw", persistence: .none), for: try url("/"))
        view.setImage(with: try url("/picture"), placeholderImage: other, on: queue)
        XCTAssertEqual(view.history, [placeholder, other], "the second call set its placeholder: a load of its own")
        try await eventually({ view.history.count == 3 }, "the second load's image arrives")
        XCTAssertEqual(view.history.last, picture)
    }

    func testANilURLCancelsAndShowsThePlaceholder() async throws {
        let view = RecordingImageView()
        view.setImage(with: try url("/picture"), on: queue)
        XCTAssertEqual(ImageBindingRegistry.activeDownloadCount(of: view), 1)
        var request = URLRequest(url: try url("/picture"))
        request.url = nil
        let failures = Recorder<URLError.Code>()
        view.setImage(withURLRequest: request, placeholderImage: placeholder, failure: { _, _, error in
            failures.append((error as? URLError)?.code ?? .unknown)
        }, on: queue)
        XCTAssertEqual(view.history, [placeholder], "the placeholder at once")
        XCTAssertEqual(failures.values, [.badURL], "failure called before the call returns")
        XCTAssertEqual(ImageBindingRegistry.activeDownloadCount(of: view), 0, "the download was cancelled")
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "the transfer was withdrawn")
        queue.sync {}
        XCTAssertEqual(view.history, [placeholder], "the cancelled image never shows")

        // With no placeholder, the image is cleared.
        view.image = picture
        view.setImage(withURLRequest: request, placeholderImage: nil, on: queue)
        XCTAssertNil(view.image)
    }

    func testAStaleCompletionIsIgnoredOnceANewerRequestReplacedIt() async throws {
        let view = RecordingImageView()
        queue.suspend()  // the first image's delivery waits on the UI queue…
        view.setImage(with: try url("/other"), on: queue)
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "the first download finished")
        downloader.sessionManager.completionQueue.sync {}  // its handlers ran: the delivery is queued
        // …while a newer request replaces it (its image comes from the cache, synchronously).
        let request = URLRequest(url: try url("/picture"))
        downloader.imageCache?.add(picture, for: request, withAdditionalIdentifier: nil)
        view.setImage(withURLRequest: request, on: queue)
        queue.resume()
        queue.sync {}
        XCTAssertEqual(view.history, [picture], "the stale image was dropped")
    }

    func testAReplacedDownloadIsCancelledAndNeverShown() async throws {
        let view = RecordingImageView()
        view.setImage(with: try url("/picture"), on: queue)
        view.setImage(with: try url("/other"), on: queue)
        try await eventually({ view.history.count == 1 }, "the newer image arrives")
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "the older transfer ended")
        queue.sync {}
        XCTAssertEqual(view.history, [other])
        XCTAssertNil(downloader.imageCache?.image(for: URLRequest(url: try url("/picture")), withAdditionalIdentifier: nil),
                     "the older transfer was cancelled, not finished")
    }

    func testWithASuccessClosureSettingTheImageIsItsJob() async throws {
        let view = RecordingImageView()
        let delivered = Recorder<Int>()
        view.setImage(withURLRequest: URLRequest(url: try url("/picture")), placeholderImage: placeholder, success: { _, response, image in
            delivered.append(response?.statusCode ?? -1)
            XCTAssertEqual(image.pixels.first, 1)
        }, on: queue)
        try await eventually({ delivered.count == 1 }, "success called")
        XCTAssertEqual(delivered.values, [200])
        XCTAssertEqual(view.history, [placeholder], "the binding did not set the image itself")

        // A cached image goes to the closure too, synchronously, with no response.
        let cachedView = RecordingImageView()
        cachedView.setImage(withURLRequest: URLRequest(url: try url("/picture")), success: { _, response, _ in
            delivered.append(response == nil ? 0 : -1)
        }, on: queue)
        XCTAssertEqual(delivered.values, [200, 0])
        XCTAssertEqual(cachedView.history, [])
    }

    func testAFailureCallsTheFailureClosureOnTheQueue() async throws {
        let view = RecordingImageView()
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let failures = Recorder<Int?>()
        view.setImage(withURLRequest: URLRequest(url: try url("/missing")), placeholderImage: placeholder, failure: { _, response, _ in
            XCTAssertEqual(response?.statusCode, 404)
            failures.append(DispatchQueue.getSpecific(key: key))
        }, on: queue)
        try await eventually({ failures.count == 1 }, "failure called")
        XCTAssertEqual(failures.values, [7])
        XCTAssertEqual(view.history, [placeholder])
    }

    func testCancelImageDownloadTask() async throws {
        let view = RecordingImageView()
        let outcomes = Recorder<String>()
        view.setImage(withURLRequest: URLRequest(url: try url("/picture")), success: { _, _, _ in outcomes.append("success") },
                      failure: { _, _, _ in outcomes.append("failure") }, on: queue)
        view.cancelImageDownloadTask()
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "the transfer was withdrawn")
        try await Task.sleep(nanoseconds: 50_000_000)
        queue.sync {}
        XCTAssertEqual(outcomes.values, [], "a cancelled download calls neither closure")
        XCTAssertEqual(view.history, [])
    }

    func testAViewReleasedMidDownloadLeavesNothingBehind() async throws {
        var view: RecordingImageView? = RecordingImageView()
        weak let weakView = view
        let entriesBefore = ImageBindingRegistry.entryCount
        view?.setImage(with: try url("/picture"), on: queue)
        XCTAssertEqual(ImageBindingRegistry.entryCount, entriesBefore + 1)
        view = nil
        XCTAssertNil(weakView, "the binding does not keep the view alive")
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "the download ends")
        queue.sync {}
        try await eventually({ ImageBindingRegistry.entryCount == entriesBefore }, "its entry is gone")
        XCTAssertNotNil(downloader.imageCache?.image(for: URLRequest(url: try url("/picture")), withAdditionalIdentifier: nil),
                        "the image still warmed the cache")
    }

    /// The downloads of views released mid-download are cancelled when the registry drops
    /// their entries (its sweep, or a new view at a released one's address): they kept their
    /// transfers (and the downloader's four slots) to the end, for images nobody would show.
    /// The sweep runs once the table outgrows its threshold, which earlier tests may have
    /// raised: live views are added until it runs (bounded).
    func testTheDownloadsOfReleasedViewsAreCancelledByTheSweep() async throws {
        server.route("/never", response: TestImages.response(try TestImages.image(width: 1, height: 1, value: 9), delay: .seconds(60)))
        var released: [RecordingImageView] = (0..<40).map { _ in RecordingImageView() }
        for (index, view) in released.enumerated() { view.setImage(with: try url("/never?released=\(index)"), on: queue) }
        XCTAssertEqual(downloader.pendingDownloadCount.merged, 40)
        released.removeAll()
        var live: [RecordingImageView] = []
        defer { for view in live { view.cancelImageDownloadTask() } }
        for index in 0..<1000 {
            let before = ImageBindingRegistry.entryCount
            let view = RecordingImageView()
            view.setImage(with: try url("/never?live=\(index)"), on: queue)
            live.append(view)
            // Swept (a new view at a released one's address replaces its entry: no change).
            if ImageBindingRegistry.entryCount < before { break }
        }
        let liveCount = live.count
        try await eventually({ downloader.pendingDownloadCount.merged == liveCount }, "the released views' downloads were withdrawn")
    }

    func testTheRegistryReleasesADownloaderOutsideItsLock() async throws {
        // A downloader whose only owner left is the binding registry: its deinit (and so its
        // cache's) runs when the registry drops the finished download, which must be unlocked.
        let lockedAtRelease = Recorder<Bool>()
        var released: ImageDownloader? = TestImages.downloader(cache: RegistryProbeCache(lockedAtRelease))
        weak let weakReleased = released
        let manager = try XCTUnwrap(released?.sessionManager)
        RecordingImageView.sharedImageDownloader = try XCTUnwrap(released)
        let view = RecordingImageView()
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }  // holds the delivery until only the registry owns the downloader
        view.setImage(with: try url("/other"), on: queue)
        RecordingImageView.sharedImageDownloader = downloader
        try await eventually({ weakReleased.map { $0.pendingDownloadCount == (0, 0, 0) } ?? false }, "the transfer ended")
        released = nil
        try await Task.sleep(nanoseconds: 100_000_000)  // lets the downloader's completion return
        XCTAssertNotNil(weakReleased, "the registry's record keeps it alive")
        gate.signal()
        try await eventually({ lockedAtRelease.count == 1 }, "the downloader and its cache were released")
        XCTAssertEqual(lockedAtRelease.values, [false], "not under the registry's lock")
        queue.sync {}
        XCTAssertEqual(view.history, [other], "the download itself was shown as usual")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testResultsArriveOnTheMainQueueByDefault() throws {
        let view = RecordingImageView()
        let onMain = Recorder<Bool>()
        view.setImage(withURLRequest: URLRequest(url: try url("/other")), success: { _, _, image in
            onMain.append(Thread.isMainThread)
        })
        for _ in 0..<400 where onMain.count == 0 { RunLoop.main.run(until: Date(timeIntervalSinceNow: 0.05)) }
        XCTAssertEqual(onMain.values, [true])
    }
}

/// A cache that keeps nothing and records, when it is released, whether the binding
/// registry's lock was held at that moment.
final class RegistryProbeCache: ImageRequestCache {
    private let lockedAtRelease: Recorder<Bool>

    init(_ lockedAtRelease: Recorder<Bool>) { self.lockedAtRelease = lockedAtRelease }

    deinit { lockedAtRelease.append(ImageBindingRegistry.isLockedNow) }

    func add(_ image: Image, withIdentifier identifier: String) {}
    func removeImage(withIdentifier identifier: String) -> Bool { false }
    func removeAllImages() -> Bool { false }
    func image(withIdentifier identifier: String) -> Image? { nil }
    func add(_ image: Image, for request: URLRequest, withAdditionalIdentifier identifier: String?) {}
    func removeImage(for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Bool { false }
    func image(for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Image? { nil }
    func shouldCacheImage(_ image: Image, for request: URLRequest, withAdditionalIdentifier identifier: String?) -> Bool {
        false
    }
}

/// A view class meant to be subclassed (not final), recording every image it was given.
class BaseImageView: ImageDisplaying, @unchecked Sendable {
    // @unchecked: `shown` is a Mutex; the view has no other state.
    private let shown = Mutex<[Image?]>([])
    var image: Image? {
        get { shown.withLock { $0.last ?? nil } }
        set { shown.withLock { $0.append(newValue) } }
    }
    /// Every image set, in order.
    var history: [Image?] { shown.withLock { $0 } }
}

/// A subclass with a shared downloader of its own.
final class SubclassedImageView: BaseImageView, @unchecked Sendable {}  // @unchecked: as its base class, no state of its own

/// A second view type, to show that the shared downloader is set per type.
final class OtherImageView: ImageDisplaying {
    var image: Image?
}
