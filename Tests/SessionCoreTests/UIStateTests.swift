import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A control of some toolkit, recording what it was told, on which queue.
final class RecordingControl: RefreshControlling, ActivityIndicating, @unchecked Sendable {
    // @unchecked: `calls` is a Mutex.
    let calls = Mutex<[String]>([])
    func beginRefreshing() { calls.withLock { $0.append("begin") } }
    func endRefreshing() { calls.withLock { $0.append("end") } }
    func startAnimating() { calls.withLock { $0.append("start") } }
    func stopAnimating() { calls.withLock { $0.append("stop") } }
}

/// `NetworkActivityIndicatorManager` and the task-state bindings, against the in-process
/// server. Waits are bounded hang guards; the delays are short, and no assertion is about time.
final class UIStateTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!
    let queue = DispatchQueue(label: "ui-state-tests.callbacks")

    override func setUp() async throws {
        manager = URLSessionManager.raw()
        server = try TestServer()
        server.route("/slow", response: .stream((0..<6).map { _ in .init(Data(repeating: 1, count: 100), delay: .milliseconds(100)) }))
        server.route("/fast", response: .text("ok"))
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
    }


    private func run(_ path: String) async throws -> SessionTask {
        await finishedDataTask(manager, try server.url(path))
    }

    // MARK: Activity indicator

    func testALongRequestTurnsTheIndicatorOnThenOff() async throws {
        let indicator = NetworkActivityIndicatorManager()
        let events = Mutex<[Bool]>([])
        indicator.callbackQueue = queue
        indicator.activationDelay = 0.05
        indicator.completionDelay = 0.05
        indicator.networkActivityActionBlock = { visible in events.withLock { $0.append(visible) } }
        indicator.isEnabled = true
        // Activity held open until the indicator is seen on, so no delay races the request.
        indicator.incrementActivityCount()
        try await eventually({ events.withLock { $0 } == [true] }, "on once activity lasted the activation delay")
        XCTAssertTrue(indicator.isNetworkActivityIndicatorVisible)
        indicator.decrementActivityCount()
        try await eventually({ events.withLock { $0 } == [true, false] }, "off after the completion delay")
        XCTAssertFalse(indicator.isNetworkActivityIndicatorVisible)
    }

    func testRunningTasksAreCounted() async throws {
        let indicator = NetworkActivityIndicatorManager()
        let task = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        try await eventually({ indicator.activityCount == 1 }, "a running task counts")
        await fulfillment(of: [done], timeout: 30)
        try await eventually({ indicator.activityCount == 0 }, "a completed task no longer counts")
    }

    func testAShortRequestNeverFlickersTheIndicator() async throws {
        let indicator = NetworkActivityIndicatorManager()
        let events = Mutex<[Bool]>([])
        indicator.callbackQueue = queue
        indicator.activationDelay = 60
        indicator.networkActivityActionBlock = { visible in events.withLock { $0.append(visible) } }
        indicator.isEnabled = true
        _ = try await run("/fast")
        try await eventually({ indicator.activityCount == 0 }, "the finished task is no longer counted")
        queue.sync {}
        XCTAssertEqual(events.withLock { $0 }, [])
    }

    func testReportedActivityIsCountedAndNeverGoesNegative() {
        let indicator = NetworkActivityIndicatorManager()
        indicator.incrementActivityCount()
        indicator.incrementActivityCount()
        XCTAssertEqual(indicator.activityCount, 2)
        indicator.decrementActivityCount()
        indicator.decrementActivityCount()
        indicator.decrementActivityCount()
        XCTAssertEqual(indicator.activityCount, 0)
        indicator.activationDelay = -.infinity
        XCTAssertEqual(indicator.activationDelay, 0)
        indicator.completionDelay = .nan
        XCTAssertEqual(indicator.completionDelay, 0)
    }

    // MARK: Bindings

    func testARefreshControlFollowsItsTask() async throws {
        let control = RecordingControl()
        let task = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        control.setRefreshingWithStateOfTask(task, on: queue)
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        try await eventually({ control.calls.withLock { $0 } == ["begin", "end"] }, "begin while running, end at completion")
        XCTAssertFalse(TaskStateBinding.isBound(control), "a binding ends with its task")
    }

    func testANewTaskReplacesTheOldOneAndAnIndicatorAnimates() async throws {
        let control = RecordingControl()
        let first = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        control.setAnimatingWithStateOfTask(first, on: queue)
        let second = manager.dataTask(with: URLRequest(url: try server.url("/fast"))) { _ in }
        control.setAnimatingWithStateOfTask(second, on: queue)
        let done = [first, second].map { expectation(forNotification: .taskDidComplete, object: $0) }
        first.resume()
        second.resume()
        await fulfillment(of: done, timeout: 30)
        try await eventually({ control.calls.withLock { $0 } == ["start", "stop"] }, "only the second task is followed")
    }

    func testAReleasedControlIsNeitherKeptNorCalled() async throws {
        weak var weakControl: RecordingControl?
        let task = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        do {
            let control = RecordingControl()
            control.setRefreshingWithStateOfTask(task, on: queue)
            weakControl = control
        }
        XCTAssertNil(weakControl, "the binding held its control")
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        queue.sync {}
    }

    func testBindingACompletedTaskShowsIdleAndNilUnbinds() async throws {
        let control = RecordingControl()
        let task = try await run("/fast")
        control.setRefreshingWithStateOfTask(task, on: queue)
        try await eventually({ control.calls.withLock { $0 } == ["end"] }, "a completed task shows idle")
        let running = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        control.setRefreshingWithStateOfTask(running, on: queue)
        XCTAssertTrue(TaskStateBinding.isBound(control))
        control.setRefreshingWithStateOfTask(nil, on: queue)
        XCTAssertFalse(TaskStateBinding.isBound(control))
        running.cancel()
    }
}

/// A progress bar of some toolkit.
final class RecordingProgressView: ProgressDisplaying, @unchecked Sendable {
    // @unchecked: `values` is a Mutex.
    let values = Mutex<[Float]>([])
    func setProgress(_ progress: Float, animated: Bool) { values.withLock { $0.append(progress) } }
}

/// `ProgressDisplaying`: a view follows one task's upload or download progress.
final class ProgressDisplayingTests: XCTestCase {
    func testAViewFollowsTheDownloadToTheEndAndAReplacedTaskIsIgnored() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/big", response: TestResponse(status: 200, body: Data(repeating: 5, count: 2_000_000)))
        let manager = URLSessionManager.raw()
        let queue = DispatchQueue(label: "progress-view")
        let view = RecordingProgressView()
        let ignored = manager.dataTask(with: URLRequest(url: try server.url("/big"))) { _ in }
        view.setProgressWithDownloadProgressOfTask(ignored, animated: false, on: queue)
        let task = manager.dataTask(with: URLRequest(url: try server.url("/big"))) { _ in }
        view.setProgressWithDownloadProgressOfTask(task, animated: true, on: queue)
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        try await eventually({ queue.sync {}; return view.values.withLock { $0.last } == 1 },
                             "the view reaches 1 when the task completes")
        let values = view.values.withLock { $0 }
        XCTAssertEqual(values, values.sorted(), "progress never goes back")
        ignored.cancel()  // never resumed; its progress never reaches the view
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testUploadProgressReachesOne() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/up") { request in .text("\(request.body.count)") }
        let manager = URLSessionManager.raw()
        let queue = DispatchQueue(label: "progress-view")
        let view = RecordingProgressView()
        var request = URLRequest(url: try server.url("/up"))
        request.httpMethod = "PUT"
        let task = manager.uploadTask(with: request, from: Data(repeating: 1, count: 600_000)) { _ in }
        view.setProgressWithUploadProgressOfTask(task, animated: false, on: queue)
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        try await eventually({ queue.sync {}; return view.values.withLock { $0.last } == 1 }, "the view reaches 1")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
