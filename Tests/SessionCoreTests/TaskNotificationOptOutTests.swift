import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `SessionConfiguration.postsTaskNotifications = false` where it meets the features that
/// depend on the notifications: the hooks and monitors (not affected), the activity indicator
/// and the task-state bindings (they turn posting back on while they listen).
///
/// Absence is proven without waiting on a clock: every task notification is posted on the
/// completion queue before or right after the task's handler, within the same block, so a
/// block queued on that serial queue from the handler runs after anything that would have been
/// posted.
final class TaskNotificationOptOutTests: XCTestCase {
    var server: TestServer!
    let completionQueue = DispatchQueue(label: "opt-out-tests.completion")

    override func setUp() async throws {
        server = try TestServer()
        server.route("/ok", response: .text("ok"))
        // An enabled indicator left by another test would make every manager post.
        try await eventually({ !TaskNotificationDemand.isWanted }, "no activity indicator of another test still listens")
    }

    override func tearDown() async throws {
        server.shutdown()
    }

    /// The task notifications posted for one object, by name.
    private final class NoteCounter: Sendable {
        private final class Seen: Sendable {
            let names = Mutex<[String]>([])
        }

        private let seen = Seen()
        private let observers: Mutex<[any NSObjectProtocol]>

        init(_ task: @escaping @Sendable () -> SessionTask?) {
            let seen = self.seen
            let names: [Notification.Name] = [.taskDidResume, .taskDidSuspend, .taskDidComplete, .downloadTaskDidMoveFileSuccessfully]
            observers = Mutex(names.map { name in
                NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { note in
                    guard let observed = note.object as? SessionTask, observed === task() else { return }
                    seen.names.withLock { $0.append(String(name.rawValue.split(separator: ".").last ?? "")) }
                }
            })
        }

        var names: [String] { seen.names.withLock { $0 } }

        func stop() {
            // Inside the lock: the observer tokens are not Sendable, so they never leave it.
            observers.withLock { observers in
                for observer in observers { NotificationCenter.default.removeObserver(observer) }
                observers = []
            }
        }
    }

    private func manager(posting: Bool, monitors: [any EventMonitor] = []) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.postsTaskNotifications = posting
        let manager = URLSessionManager.raw(configuration, eventMonitors: monitors)
        manager.completionQueue = completionQueue
        return manager
    }

    /// Runs the task `makeTask` makes (it calls `finished` from its completion handler) and
    /// returns the notifications the task posted, once everything its completion does has run.
    /// `prepare` sees the task before it resumes.
    private func notes(
        of makeTask: (_ finished: @escaping @Sendable () -> Void) -> SessionTask,
        prepare: (SessionTask) -> Void = { _ in }
    ) async -> [String] {
        let box = Mutex<SessionTask?>(nil)
        let counter = NoteCounter { box.withLock { $0 } }
        defer { counter.stop() }
        let queue = completionQueue
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            // Queued from the handler: runs after the rest of that completion (and any post it makes).
            let task = makeTask { queue.async { done.resume() } }
            box.withLock { $0 = task }
            prepare(task)
            task.resume()
        }
        return counter.names
    }

    /// `notes(of:prepare:)` for one GET of `/ok` on `manager`.
    private func notesOfOneRequest(
        on manager: URLSessionManager, prepare: (SessionTask) -> Void = { _ in }
    ) async throws -> [String] {
        let url = try server.url("/ok")
        return await notes(of: { finished in
            manager.dataTask(with: URLRequest(url: url)) { response in
                XCTAssertEqual(response.data, Data("ok".utf8))
                finished()
            }
        }, prepare: prepare)
    }

    func testAManagerThatPostsNoneStillRunsItsHooksAndMonitors() async throws {
        let monitor = RecordingMonitor()
        let posting = manager(posting: true)
        let quiet = manager(posting: false, monitors: [monitor])
        defer {
            posting.invalidateSessionCancelingTasks(true, resetSession: false)
            quiet.invalidateSessionCancelingTasks(true, resetSession: false)
        }
        let completions = Mutex(0)
        quiet.setTaskDidCompleteBlock { _, error in
            XCTAssertNil(error)
            completions.withLock { $0 += 1 }
        }
        // The same request both ways: the observer would have seen the notifications.
        let posted = try await notesOfOneRequest(on: posting)
        XCTAssertEqual(posted, ["taskDidResume", "taskDidComplete"])
        let quietTask = Mutex<SessionTask?>(nil)
        let notes = try await notesOfOneRequest(on: quiet) { task in quietTask.withLock { $0 = task } }
        XCTAssertEqual(notes, [], "postsTaskNotifications = false: no task notification")
        XCTAssertEqual(completions.withLock { $0 }, 1, "the completion hook still runs")
        let task = try XCTUnwrap(quietTask.withLock { $0 })
        try await eventually({ monitor.lines(for: task).contains("resume") && monitor.lines(for: task).last?.hasPrefix("produce") == true },
            "the monitor hears the task from its resume to its result: \(monitor.lines(for: task))")
    }

    /// Downloads post their state notices by another route (`postStateNow`, at once) and
    /// report their file's move on the operation queue: the option stops the first, and the
    /// move, which it does not cover, is still posted.
    func testAQuietDownloadStillReportsItsFileMoveAndNothingElse() async throws {
        let quiet = manager(posting: false)
        defer { quiet.invalidateSessionCancelingTasks(true, resetSession: false) }
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("opt-out-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let url = try server.url("/ok")
        let names = await notes(of: { finished in
            quiet.downloadTask(with: URLRequest(url: url), destination: { _, _ in destination }) { response in
                XCTAssertNil(response.error)
                finished()
            }
        })
        XCTAssertEqual(names, ["downloadTaskDidMoveFileSuccessfully"])
        XCTAssertEqual(try Data(contentsOf: destination), Data("ok".utf8))
    }

    func testAnEnabledActivityIndicatorMakesEveryManagerPost() async throws {
        let quiet = manager(posting: false)
        defer { quiet.invalidateSessionCancelingTasks(true, resetSession: false) }
        let indicator = NetworkActivityIndicatorManager()
        indicator.callbackQueue = DispatchQueue(label: "opt-out-tests.indicator")
        indicator.isEnabled = true
        let counted = try await notesOfOneRequest(on: quiet)
        XCTAssertEqual(counted, ["taskDidResume", "taskDidComplete"], "the indicator counts the quiet manager's tasks")
        XCTAssertEqual(indicator.activityCount, 0, "and sees each one end")
        indicator.isEnabled = true  // again: still one listener
        indicator.isEnabled = false
        XCTAssertFalse(TaskNotificationDemand.isWanted, "disabled, it no longer asks")
        let after = try await notesOfOneRequest(on: quiet)
        XCTAssertEqual(after, [])
    }

    func testABoundControlGetsItsTaskFollowedWhileOtherTasksStayQuiet() async throws {
        let quiet = manager(posting: false)
        defer { quiet.invalidateSessionCancelingTasks(true, resetSession: false) }
        let control = RecordingControl()
        let bindingQueue = DispatchQueue(label: "opt-out-tests.binding")
        let followed = try await notesOfOneRequest(on: quiet) { task in
            control.setRefreshingWithStateOfTask(task, on: bindingQueue)
        }
        XCTAssertEqual(followed, ["taskDidResume", "taskDidComplete"])
        try await eventually({ control.calls.withLock { $0 } == ["begin", "end"] }, "the control follows its task")
        let other = try await notesOfOneRequest(on: quiet)
        XCTAssertEqual(other, [], "a task no control follows stays quiet")
    }
}
