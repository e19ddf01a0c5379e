import CurlewTestSupport
import Foundation
import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// The states of a test button.
enum ButtonState: Hashable, Sendable {
    case normal, highlighted
}

/// A button of some toolkit, recording every image and background image it was given.
final class RecordingButton: StatefulImageDisplaying, @unchecked Sendable {
    // @unchecked: `events` is a Mutex; the button has no other state.
    enum Event: Equatable {
        case image(Image?, ButtonState)
        case background(Image?, ButtonState)
    }
    private let events = Mutex<[Event]>([])
    func setImage(_ image: Image?, for state: ButtonState) { events.withLock { $0.append(.image(image, state)) } }
    func setBackgroundImage(_ image: Image?, for state: ButtonState) { events.withLock { $0.append(.background(image, state)) } }
    var history: [Event] { events.withLock { $0 } }
}

/// The `UIButton+AFNetworking` semantics of `StatefulImageDisplaying`: each state's image and
/// background image load independently, with the single-image rules.
final class StatefulImageDisplayingTests: XCTestCase {
    private var server: TestServer!
    private var downloader: ImageDownloader!
    private var picture: Image!
    private var other: Image!
    private var placeholder: Image!
    private let queue = DispatchQueue(label: "stateful-image-displaying-tests.ui")

    override func setUp() async throws {
        server = try TestServer()
        picture = try TestImages.image(value: 1)
        other = try TestImages.image(value: 2)
        placeholder = try TestImages.image(value: 3)
        server.route("/picture", response: TestImages.response(picture, delay: .milliseconds(200)))
        server.route("/other", response: TestImages.response(other))
        server.route("/missing", response: .text("no", status: 404))
        downloader = TestImages.downloader()
        RecordingButton.sharedImageDownloader = downloader
    }

    override func tearDown() async throws {
        RecordingButton.sharedImageDownloader = .defaultInstance
        await shutDown(downloader)
        server.shutdown()
    }

    private func url(_ path: String) throws -> URL { try server.url(path) }

    func testStatesAndBackgroundsLoadIndependently() async throws {
        let button = RecordingButton()
        button.setImage(for: .normal, with: try url("/picture"), placeholderImage: placeholder, on: queue)
        button.setImage(for: .highlighted, with: try url("/other"), on: queue)
        button.setBackgroundImage(for: .normal, with: try url("/other"), placeholderImage: placeholder, on: queue)
        XCTAssertEqual(button.history, [.image(placeholder, .normal), .background(placeholder, .normal)])
        XCTAssertEqual(ImageBindingRegistry.activeDownloadCount(of: button), 3, "three slots in flight")
        try await eventually({ button.history.count == 5 }, "all three arrive")
        let arrived = Array(button.history.dropFirst(2))
        XCTAssertEqual(Set(arrived.map { "\($0)" }), Set([RecordingButton.Event.image(picture, .normal), .image(other, .highlighted),
                                                          .background(other, .normal)].map { "\($0)" }))
        XCTAssertEqual(server.requestCount("/other"), 1, "image and background of one URL share a transfer")
        XCTAssertEqual(ImageBindingRegistry.activeDownloadCount(of: button), 0)
    }

    func testACachedImageIsSetSynchronouslyWithoutARequest() throws {
        let button = RecordingButton()
        let request = URLRequest(url: try url("/picture"))
        downloader.imageCache?.add(picture, for: request, withAdditionalIdentifier: nil)
        button.setImage(for: .highlighted, withURLRequest: request, placeholderImage: placeholder, on: queue)
        button.setBackgroundImage(for: .normal, withURLRequest: request, placeholderImage: placeholder, on: queue)
        XCTAssertEqual(button.history, [.image(picture, .highlighted), .background(picture, .normal)])
        XCTAssertEqual(server.requests.count, 0)
    }

    func testTheSameURLAlreadyActiveForTheStateIsANoOp() async throws {
        let button = RecordingButton()
        button.setImage(for: .normal, with: try url("/picture"), placeholderImage: placeholder, on: queue)
        button.setImage(for: .normal, with: try url("/picture"), placeholderImage: other, on: queue)
        XCTAssertEqual(button.history, [.image(placeholder, .normal)])
        // Another state with the same URL is not the same slot: it gets its placeholder.
        button.setImage(for: .highlighted, with: try url("/picture"), placeholderImage: other, on: queue)
        XCTAssertEqual(button.history, [.image(placeholder, .normal), .image(other, .highlighted)])
        try await eventually({ button.history.count == 4 }, "both arrive")
        XCTAssertEqual(server.requestCount("/picture"), 1)
    }

    func testANilURLCancelsAndShowsThePlaceholder() async throws {
        let button = RecordingButton()
        button.setBackgroundImage(for: .normal, with: try url("/picture"), on: queue)
        var request = URLRequest(url: try url("/picture"))
        request.url = nil
        let failures = Recorder<URLError.Code>()
        button.setBackgroundImage(for: .normal, withURLRequest: request, placeholderImage: placeholder, failure: { _, _, error in
            failures.append((error as? URLError)?.code ?? .unknown)
        }, on: queue)
        button.setImage(for: .highlighted, withURLRequest: request, placeholderImage: nil, on: queue)
        XCTAssertEqual(button.history, [.background(placeholder, .normal), .image(nil, .highlighted)])
        XCTAssertEqual(failures.values, [.badURL])
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "the transfer was withdrawn")
        queue.sync {}
        XCTAssertEqual(button.history.count, 2, "the cancelled image never shows")
    }

    func testAStaleCompletionIsIgnoredOnceANewerRequestReplacedIt() async throws {
        let button = RecordingButton()
        queue.suspend()
        button.setImage(for: .normal, with: try url("/other"), on: queue)
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "the first download finished")
        downloader.sessionManager.completionQueue.sync {}  // its delivery is queued
        let request = URLRequest(url: try url("/picture"))
        downloader.imageCache?.add(picture, for: request, withAdditionalIdentifier: nil)
        button.setImage(for: .normal, withURLRequest: request, on: queue)
        queue.resume()
        queue.sync {}
        XCTAssertEqual(button.history, [.image(picture, .normal)], "the stale image was dropped")
    }

    func testWithASuccessClosureSettingTheImageIsItsJob() async throws {
        let button = RecordingButton()
        let delivered = Recorder<Int>()
        button.setBackgroundImage(for: .highlighted, withURLRequest: URLRequest(url: try url("/other")), placeholderImage: placeholder,
                                  success: { _, response, _ in delivered.append(response?.statusCode ?? -1) }, on: queue)
        try await eventually({ delivered.count == 1 }, "success called")
        XCTAssertEqual(delivered.values, [200])
        XCTAssertEqual(button.history, [.background(placeholder, .highlighted)])
        // From the cache: synchronously, with no response, and still not set by the binding.
        button.setImage(for: .normal, withURLRequest: URLRequest(url: try url("/other")),
                        success: { _, response, _ in delivered.append(response == nil ? 0 : -1) }, on: queue)
        XCTAssertEqual(delivered.values, [200, 0])
        XCTAssertEqual(button.history.count, 1)
    }

    func testCancellingOneStateLeavesTheOthers() async throws {
        let button = RecordingButton()
        button.setImage(for: .normal, with: try url("/picture"), on: queue)
        button.setBackgroundImage(for: .normal, with: try url("/picture"), on: queue)
        button.cancelImageDownloadTask(for: .normal)
        XCTAssertEqual(ImageBindingRegistry.activeDownloadCount(of: button), 1)
        try await eventually({ button.history.count == 1 }, "the background arrives")
        queue.sync {}
        XCTAssertEqual(button.history, [.background(picture, .normal)])
        button.cancelBackgroundImageDownloadTask(for: .normal)  // nothing left: no effect
        XCTAssertEqual(ImageBindingRegistry.activeDownloadCount(of: button), 0)
    }

    func testAFailureCallsTheFailureClosure() async throws {
        let button = RecordingButton()
        let failures = Recorder<Int>()
        button.setImage(for: .normal, withURLRequest: URLRequest(url: try url("/missing")),
                        failure: { _, response, _ in failures.append(response?.statusCode ?? -1) }, on: queue)
        try await eventually({ failures.count == 1 }, "failure called")
        XCTAssertEqual(failures.values, [404])
        XCTAssertEqual(button.history, [])
    }

    func testAButtonReleasedMidDownloadLeavesNothingBehind() async throws {
        let entriesBefore = ImageBindingRegistry.entryCount
        var button: RecordingButton? = RecordingButton()
        weak let weakButton = button
        button?.setImage(for: .normal, with: try url("/picture"), on: queue)
        button?.setBackgroundImage(for: .highlighted, with: try url("/picture"), on: queue)
        XCTAssertEqual(ImageBindingRegistry.entryCount, entriesBefore + 1)
        button = nil
        XCTAssertNil(weakButton)
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "the download ends")
        downloader.sessionManager.completionQueue.sync {}
        queue.sync {}
        XCTAssertEqual(ImageBindingRegistry.entryCount, entriesBefore, "its entry is gone")
    }
}
