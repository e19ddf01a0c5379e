import Dispatch
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Serialization
@testable import SessionCore

/// `data(for:)` and `dataResponse(for:)` resume their caller where the transfer ends
/// (`TaskOptions.resumesDirectly`), a thread hop before the completion queue; the rest of the
/// completion still runs there. A caller with a task executor preference keeps the completion
/// queue's route (its executor's `enqueue` must not run on the driver thread).
final class AsyncDirectResumeTests: XCTestCase {
    /// The completion queue is held by a block of the test's: the await still returns, with
    /// the response the completion queue would have given; the `taskDidComplete`
    /// notification follows once the queue is let go.
    func testDataResponseReturnsWhileTheCompletionQueueIsHeld() async throws {
        let manager = URLSessionManager.raw()
        let url = try Peer.url("/get?direct-resume=held")
        let release = DispatchSemaphore(value: 0)
        defer { release.signal() }  // a failed check does not leave the queue held
        let held = expectation(description: "completion queue held")
        manager.completionQueue.async {
            held.fulfill()
            release.wait()
        }
        await fulfillment(of: [held], timeout: 30)
        let posted = expectation(description: "taskDidComplete")
        let postedWhileHeld = Mutex(false)
        let releasing = Mutex(false)
        let observer = NotificationCenter.default.addObserver(forName: .taskDidComplete, object: nil, queue: nil) { note in
            guard (note.object as? SessionTask)?.originalRequest?.url == url else { return }
            postedWhileHeld.withLock { $0 = !releasing.withLock { $0 } }
            posted.fulfill()
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let returned = expectation(description: "dataResponse(for:) returned")
        let response = Mutex<DataResponse?>(nil)
        Task {
            let answer = try await manager.dataResponse(for: URLRequest(url: url))
            response.withLock { $0 = answer }
            returned.fulfill()
        }
        // Held until the call returned: with the completion queue's route, it never would.
        await fulfillment(of: [returned], timeout: 60)
        let answer = try XCTUnwrap(response.withLock { $0 })
        XCTAssertNil(answer.error)
        XCTAssertEqual(answer.head?.statusCode, 200)
        XCTAssertEqual(answer.request?.url, url)
        XCTAssertNotNil(answer.metrics)
        let body = try XCTUnwrap(answer.data)
        XCTAssertEqual((answer.value as? Data), body, "the raw body is the result, as on the completion queue")
        let echoed = try XCTUnwrap(JSONSerialization.jsonObject(with: body) as? [String: Any])
        XCTAssertEqual(echoed["url"] as? String, url.absoluteString)

        releasing.withLock { $0 = true }
        release.signal()
        await fulfillment(of: [posted], timeout: 30)
        XCTAssertFalse(postedWhileHeld.withLock { $0 }, "the rest of the completion ran on the completion queue")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A failed call resumes directly too, with its error.
    func testAFailureReturnsWhileTheCompletionQueueIsHeld() async throws {
        let manager = URLSessionManager.raw()
        let release = DispatchSemaphore(value: 0)
        defer { release.signal() }  // a failed check does not leave the queue held
        let held = expectation(description: "completion queue held")
        manager.completionQueue.async {
            held.fulfill()
            release.wait()
        }
        await fulfillment(of: [held], timeout: 30)
        let listener = try LoopbackListener()  // accepts nothing: refused once closed
        let port = listener.port
        listener.close()
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:\(port)/"))
        let returned = expectation(description: "data(for:) threw")
        let failure = Mutex<(any Error)?>(nil)
        Task {
            do {
                _ = try await manager.data(for: URLRequest(url: url))
            } catch {
                failure.withLock { $0 = error }
            }
            returned.fulfill()
        }
        await fulfillment(of: [returned], timeout: 60)
        release.signal()
        let error = try XCTUnwrap(failure.withLock { $0 } as? SessionError)
        guard case .cannotConnect = error else { return XCTFail("expected cannotConnect, got \(error)") }
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// Which calls resume directly: a plain task's, not one with a task executor preference,
    /// not an actor-isolated caller's.
    func testOnlyCallsThatResumeOnTheGlobalExecutorResumeDirectly() async {
        let executor = QueueExecutor()
        let plain = await Task.detached { URLSessionManager.resumesOnGlobalExecutor(isolation: nil) }.value
        XCTAssertTrue(plain)
        let preferring = await Task.detached {
            await withTaskExecutorPreference(executor) { URLSessionManager.resumesOnGlobalExecutor(isolation: nil) }
        }.value
        XCTAssertFalse(preferring)
        let isolated = await IsolatedProbe().resumesDirectly()
        XCTAssertFalse(isolated)
    }

    /// With a task executor preference the call returns only after the completion queue let
    /// go: its continuation is resumed there, as before, not from the driver thread.
    func testATaskExecutorPreferenceWaitsForTheCompletionQueue() async throws {
        let manager = URLSessionManager.raw()
        let url = try Peer.url("/get?direct-resume=executor")
        let release = DispatchSemaphore(value: 0)
        defer { release.signal() }  // a failed check does not leave the queue held
        let held = expectation(description: "completion queue held")
        manager.completionQueue.async {
            held.fulfill()
            release.wait()
        }
        await fulfillment(of: [held], timeout: 30)
        let released = Mutex(false)
        let returnedAfterRelease = Mutex<Bool?>(nil)
        let returned = expectation(description: "data(for:) returned")
        let executor = QueueExecutor()
        Task.detached {
            await withTaskExecutorPreference(executor) {
                let status = try? await manager.data(for: URLRequest(url: url)).1.statusCode
                XCTAssertEqual(status, 200)
                returnedAfterRelease.withLock { $0 = released.withLock { $0 } }
                returned.fulfill()
            }
        }
        // Until the transfer has ended (the task completed on the driver thread), then a
        // moment for a wrongly direct resume to show; bounded.
        var sawTask = false
        for _ in 0..<3000 {
            let tasks = manager.engine.state.withLock { $0.tasks.tasks }
            if let task = tasks.first {
                sawTask = true
                if task.state == .completed { break }
            } else if sawTask {
                break
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        try await Task.sleep(nanoseconds: 100_000_000)
        released.withLock { $0 = true }
        release.signal()
        await fulfillment(of: [returned], timeout: 60)
        XCTAssertEqual(returnedAfterRelease.withLock { $0 }, true)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}

/// Runs its jobs on a serial dispatch queue: a caller's own task executor.
private final class QueueExecutor: TaskExecutor {
    let queue = DispatchQueue(label: "AsyncDirectResumeTests.executor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// An actor-isolated caller.
private actor IsolatedProbe {
    func resumesDirectly() -> Bool { URLSessionManager.resumesOnGlobalExecutor() }
}
