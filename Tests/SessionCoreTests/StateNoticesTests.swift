import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `StateNotices` alone: when the driver queues a post, how often, and what a post delivers.
/// The engine's use of it (which notices wait, who posts them) is in `EngineObserverTests`.
final class StateNoticesTests: XCTestCase {
    /// The state notices posted for some tasks, in order.
    private final class Posted: Sendable {
        private let lines = Mutex<[String]>([])
        func add(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    /// Records the state notices posted for `tasks`; remove the observers when done.
    private func record(_ tasks: [SessionTask]) -> (Posted, [any NSObjectProtocol]) {
        let posted = Posted()
        return (posted, tasks.enumerated().flatMap { index, task in
            [Notification.Name.taskDidResume, .taskDidSuspend].map { name in
                NotificationCenter.default.addObserver(forName: name, object: task, queue: nil) { _ in
                    posted.add("\(index) \(name == .taskDidResume ? "resume" : "suspend")")
                }
            }
        })
    }

    func testTheDriverQueuesOnePostOnceTheOldestNoticeIsDueAndItPostsAllInOrder() throws {
        let (manager, tasks) = try makeUnsentTasks(2)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (posted, observers) = record(tasks)
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        let (notices, queue) = (StateNotices(), DispatchQueue(label: "test.state-notices"))

        XCTAssertNil(notices.due)
        XCTAssertEqual(notices.flushIfDue(now: .max, on: queue), .nothing, "nothing waits: nothing to do")
        notices.add(.taskDidResume, for: tasks[0], now: 1_000)
        notices.add(.taskDidSuspend, for: tasks[0], now: 2_000)  // the oldest decides
        notices.add(.taskDidResume, for: tasks[1], now: 3_000)
        let due = 1_000 + StateNotices.longestWait
        XCTAssertEqual(notices.due, due)

        queue.suspend()  // so a queued post cannot run before the checks below
        XCTAssertEqual(notices.flushIfDue(now: due - 1, on: queue), .checkAt(due), "not due yet: check again then")
        XCTAssertEqual(notices.flushIfDue(now: due, on: queue), .queuedPost, "due: a post is queued")
        XCTAssertEqual(notices.flushIfDue(now: due + 1, on: queue), .nothing, "one is queued already: no second")
        XCTAssertEqual(posted.all, [], "nothing is posted on the driver's side")
        queue.resume()
        queue.sync {}

        XCTAssertEqual(posted.all, ["0 resume", "0 suspend", "1 resume"])
        XCTAssertNil(notices.due)
        notices.postPending()
        XCTAssertEqual(posted.all.count, 3, "each notice is posted once")
    }

    /// A completion's delivery posts what waits; a later notice starts a new wait, and the
    /// driver may queue a post for it again.
    func testADeliveryPostsWhatWaitsAndALaterNoticeWaitsAnew() throws {
        let (manager, tasks) = try makeUnsentTasks(1)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (posted, observers) = record(tasks)
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        let (notices, queue) = (StateNotices(), DispatchQueue(label: "test.state-notices"))

        notices.add(.taskDidResume, for: tasks[0], now: 10)
        queue.suspend()
        XCTAssertEqual(notices.flushIfDue(now: .max, on: queue), .queuedPost)  // not run yet
        notices.postPending()  // a completion delivered first: it posts, and clears the flag
        XCTAssertEqual(posted.all, ["0 resume"])

        notices.add(.taskDidSuspend, for: tasks[0], now: 50)
        XCTAssertEqual(notices.due, 50 + StateNotices.longestWait, "a new wait from the new notice")
        XCTAssertEqual(notices.flushIfDue(now: .max, on: queue), .queuedPost, "its own post: the flag was cleared")
        queue.resume()
        queue.sync {}  // the first queued post finds the new notice and posts it: still once
        XCTAssertEqual(posted.all, ["0 resume", "0 suspend"])
        XCTAssertEqual(notices.flushIfDue(now: .max, on: queue), .nothing, "nothing waits")
        queue.sync {}
        XCTAssertEqual(posted.all, ["0 resume", "0 suspend"])
    }

    /// A clock at its very end neither wraps the due time to the past nor to "none".
    func testADueTimePastTheClocksEndIsStillADueTime() throws {
        let (manager, tasks) = try makeUnsentTasks(1)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let notices = StateNotices()
        notices.add(.taskDidResume, for: tasks[0], now: .max - 5)
        let due = try XCTUnwrap(notices.due)
        XCTAssertGreaterThanOrEqual(due, UInt64.max - 5, "not wrapped into the past")
        notices.postPending()
        XCTAssertNil(notices.due)
    }
}
