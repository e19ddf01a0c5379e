import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A finished task keeps nothing alive: its stored closures are released when it completes,
/// so a closure that captures its task or its manager leaks neither.
final class TaskReleaseTests: XCTestCase {
    /// Polls `condition` (bounded) until it holds: releases happen on the completion queue
    /// just after the handler returns.
    private func eventually(_ condition: () -> Bool, attempts: Int = 400) async -> Bool {
        for _ in 0..<attempts {
            if condition() { return true }
            try? await Task.sleep(nanoseconds: 25_000_000)
        }
        return condition()
    }

    func testCallbackStyleRequestsDoNotKeepTheirTasksAlive() async throws {
        let manager = HTTPSessionManager(baseURL: try Peer.httpbin)
        manager.responseSerializer = JSONResponseSerializer()
        let weakTasks = Mutex<[WeakBox<DataTask>]>([])
        let done = expectation(description: "20 GETs")
        done.expectedFulfillmentCount = 20
        for index in 0..<20 {
            let task = manager.get("get", parameters: ["n": index], success: { _, _ in done.fulfill() }, failure: { _, error in
                XCTFail("\(error)")
                done.fulfill()
            })
            if let task { weakTasks.withLock { $0.append(WeakBox(task)) } }
        }
        await fulfillment(of: [done], timeout: 60)
        let released = await eventually { weakTasks.withLock { boxes in boxes.allSatisfy { $0.value == nil } } }
        let alive = weakTasks.withLock { boxes in boxes.filter { $0.value != nil }.count }
        XCTAssertTrue(released, "\(alive) of 20 finished tasks are still alive")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testAHandlerThatCapturesItsOwnTaskDoesNotLeakIt() async throws {
        let manager = URLSessionManager.raw()
        let weakTask: WeakBox<DataTask>
        do {
            let holder = TaskHolder()
            let done = expectation(description: "done")
            let task = manager.dataTask(with: URLRequest(url: try Peer.url("/get"))) { _ in
                // The handler reaches its own task: task → handler → holder → task.
                XCTAssertEqual(holder.task?.state, .completed)
                done.fulfill()
            }
            holder.task = task
            weakTask = WeakBox(task)
            task.resume()
            await fulfillment(of: [done], timeout: 30)
        }
        let released = await eventually { weakTask.value == nil }
        XCTAssertTrue(released, "a completed task whose handler captured it is still alive")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testAManagerCapturedByItsOwnSuccessClosureIsFreedAndStopsItsThread() async throws {
        let weakManager: WeakBox<HTTPSessionManager>
        let threadID: Int32?
        do {
            let manager = HTTPSessionManager(baseURL: try Peer.httpbin)
            weakManager = WeakBox(manager)
            threadID = manager.engine.driver?.threadID.withLock { $0 }
            let done = expectation(description: "done")
            manager.get("get", success: { _, _ in
                _ = manager.baseURL  // the closure holds the manager
                done.fulfill()
            }, failure: { _, error in
                XCTFail("\(error)")
                done.fulfill()
            })
            await fulfillment(of: [done], timeout: 30)
        }
        let freed = await eventually { weakManager.value == nil }
        XCTAssertTrue(freed, "the manager captured by its own success closure was never freed")
        // Freeing the manager shuts its driver thread down.
        if let threadID {
            let exited = await eventually { !FileManager.default.fileExists(atPath: "/proc/self/task/\(threadID)") }
            XCTAssertTrue(exited, "the driver thread \(threadID) still runs")
        }
    }

    func testProgressClosuresAreReleasedWhenTheTaskCompletes() async throws {
        let manager = URLSessionManager.raw()
        let weakToken: WeakBox<Token>
        let task: DataTask
        do {
            let token = Token()
            weakToken = WeakBox(token)
            let done = expectation(description: "done")
            var request = URLRequest(url: try Peer.url("/post"))
            request.httpMethod = "POST"
            request.httpBody = Data("x".utf8)
            task = manager.dataTask(
                with: request,
                uploadProgress: { [token] _ in _ = token },
                downloadProgress: { [token] _ in _ = token },
                completionHandler: { _ in done.fulfill() })
            task.resume()
            await fulfillment(of: [done], timeout: 30)
        }
        // The task itself is still referenced here; only its closures must be gone.
        let released = await eventually { weakToken.value == nil }
        XCTAssertTrue(released, "the progress closures of a completed task are still held")
        XCTAssertEqual(task.state, .completed)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testHooksThatCaptureTheManagerAreReleasedOnInvalidation() async throws {
        let weakManager: WeakBox<URLSessionManager>
        do {
            let manager = URLSessionManager.raw()
            weakManager = WeakBox(manager)
            manager.setTaskDidCompleteBlock { _, _ in _ = manager.configuration }
            manager.setTaskWillPerformHTTPRedirectionBlock { _, _, request in
                _ = manager.configuration
                return request
            }
            _ = await manager.response(for: URLRequest(url: try Peer.url("/get")))
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            await manager.waitUntilInvalidated()
        }
        let freed = await eventually { weakManager.value == nil }
        XCTAssertTrue(freed, "an invalidated manager is kept alive by its own hooks")
    }
}

/// A weak reference for leak checks.
final class WeakBox<T: AnyObject>: @unchecked Sendable {
    // @unchecked: written once in init; `weak` loads are atomic in Swift's runtime.
    weak var value: T?
    init(_ value: T) { self.value = value }
}

/// Something for a closure to capture.
final class Token: Sendable {}

/// Holds a task for its own completion handler (a reference cycle while the task runs).
final class TaskHolder: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Mutex<DataTask?>(nil)
    var task: DataTask? {
        get { lock.withLock { $0 } }
        set { lock.withLock { $0 = newValue } }
    }
}
