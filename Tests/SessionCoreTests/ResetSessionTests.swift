import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `invalidateSessionCancelingTasks(_:resetSession: true)` is AFNetworking's reset: the
/// manager comes back on a fresh session and keeps working.
final class ResetSessionTests: XCTestCase {
    var server: TestServer!

    override func setUp() async throws {
        server = try TestServer()
        server.route("/ok", response: .text("ok"))
        server.route("/slow", response: .stream((0..<50).map { _ in .init(Data(repeating: 1, count: 100), delay: .milliseconds(100)) }))
    }

    override func tearDown() async throws {
        server.shutdown()
    }

    private func reset(_ manager: URLSessionManager, cancelling: Bool) async {
        let invalidated = expectation(forNotification: .sessionDidInvalidate, object: manager)
        manager.invalidateSessionCancelingTasks(cancelling, resetSession: true)
        await fulfillment(of: [invalidated], timeout: 30)
    }

    func testAResetManagerKeepsWorking() async throws {
        let manager = URLSessionManager.raw()
        let before = await manager.response(for: URLRequest(url: try server.url("/ok")))
        XCTAssertNil(before.error)
        let oldDriver = try XCTUnwrap(manager.engine.driver)

        await reset(manager, cancelling: true)

        XCTAssertFalse(manager.engine.driver === oldDriver, "a fresh driver, with fresh connections")
        for _ in 0..<3 {
            let after = await manager.response(for: URLRequest(url: try server.url("/ok")))
            XCTAssertNil(after.error, "a request after the reset failed: \(String(describing: after.error))")
            XCTAssertEqual(after.data, Data("ok".utf8))
        }
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testAResetCancelsRunningTasksAndKeepsHooksAndSettings() async throws {
        let manager = URLSessionManager.raw()
        let completions = Mutex(0)
        manager.setTaskDidCompleteBlock { _, _ in completions.withLock { $0 += 1 } }
        let queue = DispatchQueue(label: "reset-test.completion")
        manager.completionQueue = queue

        let running = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: running)
        running.resume()
        await reset(manager, cancelling: true)
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(running.error as? SessionError, .cancelled)

        let next = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in }
        // Posted after the completion hook has run.
        let nextDone = expectation(forNotification: .taskDidComplete, object: next)
        next.resume()
        await fulfillment(of: [nextDone], timeout: 30)
        XCTAssertNil(next.error)
        XCTAssertEqual(completions.withLock { $0 }, 2, "the completion hook survived the reset")
        XCTAssertTrue(manager.completionQueue === queue)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A plain invalidation still ends the manager for good.
    func testInvalidatingWithoutResetStillEndsTheManager() async throws {
        let manager = URLSessionManager.raw()
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        let refused = await manager.response(for: URLRequest(url: try server.url("/ok")))
        XCTAssertEqual(refused.error as? SessionError, .sessionInvalidated)
    }

    /// A manager released while its reset is under way does not leave a driver thread behind.
    func testAManagerReleasedDuringAResetLeavesNoThread() async throws {
        var manager: URLSessionManager? = URLSessionManager.raw()
        let engine = try XCTUnwrap(manager?.engine)
        let running = manager?.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        running?.resume()
        manager?.invalidateSessionCancelingTasks(false, resetSession: true)  // waits for /slow
        manager = nil  // deinit: invalidate without reset, cancelling
        var state = engine.invalidationState
        for _ in 0..<1000 where state != .invalidated {
            try await Task.sleep(nanoseconds: 10_000_000)
            state = engine.invalidationState
        }
        XCTAssertEqual(state, .invalidated, "the engine came back after its manager was released")
        if let threadID = engine.driver?.threadID.withLock({ $0 }) {
            var exited = false
            for _ in 0..<500 {
                if !FileManager.default.fileExists(atPath: "/proc/self/task/\(threadID)") { exited = true; break }
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            XCTAssertTrue(exited, "the driver thread outlived its manager")
        }
    }

    /// AFNetworking's own reset test: a request made right after the call (before the
    /// invalidation notification) runs on the reset manager instead of failing.
    func testARequestRightAfterAResetRunsOnTheFreshSession() async throws {
        let manager = URLSessionManager.raw()
        let oldDriver = try XCTUnwrap(manager.engine.driver)
        let running = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        running.resume()

        manager.invalidateSessionCancelingTasks(true, resetSession: true)
        let after = await manager.response(for: URLRequest(url: try server.url("/ok")))

        XCTAssertNil(after.error, "a request right after the reset failed: \(String(describing: after.error))")
        XCTAssertEqual(after.data, Data("ok".utf8))
        XCTAssertFalse(manager.engine.driver === oldDriver, "it ran on the fresh driver")
        XCTAssertEqual(running.error as? SessionError, .cancelled)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A request made during a reset that lets the old tasks finish never carries the old
    /// session's cookies: it starts once the jar is empty.
    func testARequestDuringAResetSendsNoOldCookie() async throws {
        let manager = URLSessionManager.raw()
        let set = await manager.response(for: URLRequest(url: try Peer.url("/cookies/set?session=old-user")))
        XCTAssertNil(set.error)
        let slow = manager.dataTask(with: URLRequest(url: try Peer.url("/delay/1"))) { _ in }
        slow.resume()

        manager.invalidateSessionCancelingTasks(false, resetSession: true)
        let echo = await manager.response(for: URLRequest(url: try Peer.url("/cookies")))

        XCTAssertNil(echo.error)
        let cookies = try XCTUnwrap(try json(echo.data)["cookies"] as? [String: Any])
        XCTAssertNil(cookies["session"], "the fresh session sent the old session's cookie")
        XCTAssertNil(slow.error, "the old task was allowed to finish")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A task resumed during a reset and cancelled before the fresh session starts completes
    /// with `.cancelled`, once.
    func testCancellingATaskParkedForAResetCompletesIt() async throws {
        let manager = URLSessionManager.raw()
        let running = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in }
        running.resume()
        manager.invalidateSessionCancelingTasks(false, resetSession: true)  // waits for /slow
        let completions = Mutex(0)
        let parked = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in completions.withLock { $0 += 1 } }
        let done = expectation(forNotification: .taskDidComplete, object: parked)
        parked.resume()
        parked.cancel()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(parked.error as? SessionError, .cancelled)
        running.cancel()
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        XCTAssertEqual(completions.withLock { $0 }, 1)
    }

    /// A task parked for a reset waits within its resource timeout: the reset waits for the old
    /// session's tasks (here one never resumed, which it waits for until it is cancelled), and
    /// the parked task had no clock until it reached the driver, so it waited with them.
    func testATaskParkedForAResetEndsAtItsResourceTimeout() async throws {
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForResource = 1
        let manager = URLSessionManager.raw(configuration)
        let old = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in }
        manager.invalidateSessionCancelingTasks(false, resetSession: true)  // waits for `old`
        let parked = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: parked)
        parked.resume()
        await fulfillment(of: [done], timeout: 30)
        guard case .timedOut(let detail)? = parked.error as? SessionError else {
            return XCTFail("the parked task must time out, got \(String(describing: parked.error))")
        }
        XCTAssertTrue(detail.contains("reset"), detail)
        XCTAssertEqual(server.requests.count, 0, "nothing was sent")
        let invalidated = expectation(forNotification: .sessionDidInvalidate, object: manager)
        old.cancel()
        await fulfillment(of: [invalidated], timeout: 30)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A task of the old session resumed during a reset that lets old tasks finish runs on the
    /// old session: the reset completes and the fresh session's requests run (they are not
    /// parked behind a task that is itself parked).
    func testAnOldTaskResumedDuringAResetLetsTheResetFinish() async throws {
        let manager = URLSessionManager.raw()
        let old = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in }
        let oldDone = expectation(forNotification: .taskDidComplete, object: old)
        let invalidated = expectation(forNotification: .sessionDidInvalidate, object: manager)
        manager.invalidateSessionCancelingTasks(false, resetSession: true)
        old.resume()
        let fresh = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in }
        let freshDone = expectation(forNotification: .taskDidComplete, object: fresh)
        fresh.resume()
        await fulfillment(of: [oldDone, invalidated, freshDone], timeout: 30)
        XCTAssertNil(old.error)
        XCTAssertNil(fresh.error)
        XCTAssertEqual(fresh.response?.statusCode, 200)
        // Without a reset that completes, the fresh task would wait forever: release it.
        fresh.cancel()
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A request made right after a reset is not answered from the previous user's private
    /// cache entry (the cache is asked only once the jar is empty and the partition renewed).
    func testARequestRightAfterAResetIsNotAnsweredFromTheOldUsersCache() async throws {
        server.route("/login", response: TestResponse(status: 200, headers: [("Set-Cookie", "user=alice; Path=/")], body: Data()))
        server.route("/me") { request in
            let cookie = request.headers.first { $0.name.lowercased() == "cookie" }?.value ?? "nobody"
            return TestResponse(status: 200, headers: [("Cache-Control", "private, max-age=60")], body: Data(cookie.utf8))
        }
        var configuration = SessionConfiguration.default
        configuration.responseCache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 0)
        let manager = URLSessionManager.raw(configuration)
        _ = await manager.response(for: URLRequest(url: try server.url("/login")))
        let before = await manager.response(for: URLRequest(url: try server.url("/me")))
        XCTAssertEqual(before.data, Data("user=alice".utf8))

        manager.invalidateSessionCancelingTasks(true, resetSession: true)
        let after = await manager.response(for: URLRequest(url: try server.url("/me")))

        XCTAssertNil(after.error)
        XCTAssertEqual(after.data, Data("nobody".utf8), "the logged-out session got the previous user's response")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
