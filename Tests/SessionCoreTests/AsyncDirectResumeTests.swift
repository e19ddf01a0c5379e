import Dispatch
import Foundation
import Glibc
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Serialization
import CurlewTestSupport
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
        let release = await hold(manager.completionQueue)
        defer { release.signal() }  // a failed check does not leave the queue held
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
        let release = await hold(manager.completionQueue)
        defer { release.signal() }  // a failed check does not leave the queue held
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

    /// Redirects and the idle timeout meet the direct route (the completion queue held, so
    /// only that route can answer): the final request and response after two redirects, and
    /// the timeout's error.
    func testRedirectsAndTimeoutsThroughTheDirectRoute() async throws {
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForRequest = 1
        let manager = URLSessionManager.raw(configuration)
        let release = await hold(manager.completionQueue)
        defer { release.signal() }

        let redirected = try await manager.dataResponse(for: URLRequest(url: try Peer.url("/redirect/2")))
        XCTAssertNil(redirected.error)
        XCTAssertEqual(redirected.head?.statusCode, 200)
        XCTAssertEqual(redirected.request?.url?.path, "/get", "the request sent last")
        XCTAssertEqual(redirected.metrics?.redirectCount, 2)

        do {
            _ = try await manager.data(for: URLRequest(url: try Peer.url("/delay/5")))
            XCTFail("expected the idle timeout")
        } catch SessionError.timedOut {
            // expected
        }
        release.signal()
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// Invalidation meets the direct route: the callers are resumed from the driver, while
    /// their tasks leave the manager on the completion queue. An invalidation that lets them
    /// finish ends only after every one was delivered; one that cancels ends them all with
    /// `cancelled` (or their response, if it came first).
    func testInvalidationWaitsForDirectlyResumedCalls() async throws {
        let manager = URLSessionManager.raw()
        let url = try Peer.url("/delay/1")
        let completed = Mutex(0)
        let observer = NotificationCenter.default.addObserver(forName: .taskDidComplete, object: nil, queue: nil) { note in
            guard (note.object as? SessionTask)?.originalRequest?.url == url else { return }
            completed.withLock { $0 += 1 }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let calls = (0..<8).map { _ in
            Task { try await manager.data(for: URLRequest(url: url)).1.statusCode }
        }
        // Every call has its task before the manager stops taking new ones.
        for _ in 0..<3000 where manager.tasks.count < 8 { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(manager.tasks.count, 8)
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        // Bounded: a directly resumed task whose completion never ran would hold it forever.
        let invalidated = expectation(description: "invalidated")
        Task {
            await manager.waitUntilInvalidated()
            invalidated.fulfill()
        }
        await fulfillment(of: [invalidated], timeout: 60)
        // The invalidation ended after every task's completion, notification included.
        XCTAssertEqual(completed.withLock { $0 }, 8)
        for call in calls {
            let status = try await call.value
            XCTAssertEqual(status, 200)
        }

        let cancelling = URLSessionManager.raw()
        let slow = try Peer.url("/delay/10")
        let cancelled = (0..<8).map { _ in
            Task { () -> String in
                do {
                    return "\(try await cancelling.data(for: URLRequest(url: slow)).1.statusCode)"
                } catch SessionError.cancelled {
                    return "cancelled"
                }
            }
        }
        for _ in 0..<3000 where cancelling.tasks.count < 8 { try await Task.sleep(nanoseconds: 10_000_000) }
        cancelling.invalidateSessionCancelingTasks(true, resetSession: false)
        let cancelledAll = expectation(description: "invalidated, cancelling")
        Task {
            await cancelling.waitUntilInvalidated()
            cancelledAll.fulfill()
        }
        await fulfillment(of: [cancelledAll], timeout: 60)
        for call in cancelled {
            let outcome = try await call.value
            XCTAssertEqual(outcome, "cancelled")
        }
        XCTAssertTrue(cancelling.tasks.isEmpty)
    }

    /// Which calls resume directly: a plain task's, not one with a task executor preference,
    /// not an actor-isolated caller's.
    func testOnlyCallsThatResumeOnTheGlobalExecutorResumeDirectly() async {
        let executor = QueueExecutor()
        let plain = await Task.detached { CallerExecutor.resumesOnGlobalExecutor(isolation: nil) }.value
        XCTAssertTrue(plain)
        let preferring = await Task.detached {
            await withTaskExecutorPreference(executor) { CallerExecutor.resumesOnGlobalExecutor(isolation: nil) }
        }.value
        XCTAssertFalse(preferring)
        let isolated = await IsolatedProbe().resumesDirectly()
        XCTAssertFalse(isolated)
    }

    /// Under a task executor preference, `data(for:)` works and its caller's executor is never
    /// asked to `enqueue` on a driver thread (it is resumed from the completion queue).
    func testATaskExecutorsEnqueueNeverRunsOnTheDriverForDataFor() async throws {
        let manager = URLSessionManager.raw()
        let executor = QueueExecutor()
        let url = try Peer.url("/get?direct-resume=executor")
        let statuses = await Task.detached {
            await withTaskExecutorPreference(executor) {
                var statuses: [Int] = []
                for _ in 0..<5 {
                    statuses.append((try? await manager.data(for: URLRequest(url: url)).1.statusCode) ?? 0)
                }
                return statuses
            }
        }.value
        XCTAssertEqual(statuses, [200, 200, 200, 200, 200])
        XCTAssertGreaterThan(executor.enqueued, 0, "the calls ran on the executor")
        XCTAssertEqual(executor.enqueuedOnDriver, 0, "an enqueue ran on a driver thread")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// The same for a streamed body, whose head and chunks the driver hands to a waiting
    /// reader: a reader under a task executor preference is resumed from a global queue.
    func testATaskExecutorsEnqueueNeverRunsOnTheDriverForAStream() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/drip", response: .stream((0..<4).map { _ in .init(Data("x".utf8), delay: .milliseconds(30)) }))
        let manager = URLSessionManager.raw()
        let executor = QueueExecutor()
        let url = try server.url("/drip")
        let body = await Task.detached {
            await withTaskExecutorPreference(executor) { () async -> Data? in
                guard let (bytes, _) = try? await manager.bytes(for: URLRequest(url: url)) else { return nil }
                var body = Data()
                do {
                    for try await chunk in bytes { body.append(chunk) }
                } catch {
                    return nil
                }
                return body
            }
        }.value
        XCTAssertEqual(body, Data("xxxx".utf8))
        XCTAssertGreaterThan(executor.enqueued, 0, "the reader ran on the executor")
        XCTAssertEqual(executor.enqueuedOnDriver, 0, "an enqueue ran on a driver thread")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}

extension AsyncDirectResumeTests {
    /// Occupies `queue` with a block that waits for the returned semaphore; returns once the
    /// block runs.
    func hold(_ queue: DispatchQueue) async -> DispatchSemaphore {
        let release = DispatchSemaphore(value: 0)
        let held = expectation(description: "queue held")
        queue.async {
            held.fulfill()
            release.wait()
        }
        await fulfillment(of: [held], timeout: 30)
        return release
    }
}

/// Runs its jobs on a serial dispatch queue: a caller's own task executor. Counts its
/// `enqueue` calls, and those made on one of Curlew's driver threads ("curlew.drv.N").
private final class QueueExecutor: TaskExecutor {
    let queue = DispatchQueue(label: "AsyncDirectResumeTests.executor")
    private let counts = Mutex((all: 0, onDriver: 0))

    var enqueued: Int { counts.withLock { $0.all } }
    var enqueuedOnDriver: Int { counts.withLock { $0.onDriver } }

    func enqueue(_ job: consuming ExecutorJob) {
        let onDriver = Self.currentThreadName().hasPrefix("curlew.drv")
        counts.withLock {
            $0.all += 1
            if onDriver { $0.onDriver += 1 }
        }
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// The kernel's name of the calling thread (the driver sets its own there).
    private static func currentThreadName() -> String {
        let file = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return "" }
        defer { close(file) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
        guard count > 0 else { return "" }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}

/// An actor-isolated caller.
private actor IsolatedProbe {
    func resumesDirectly() -> Bool { CallerExecutor.resumesOnGlobalExecutor() }
}
