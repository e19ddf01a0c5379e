import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The hooks and notifications as the engine's own observers (`EngineObservers`): each once,
/// in the order and on the queue their contracts name, with or without user monitors.
final class EngineObserverTests: XCTestCase {
    var server: TestServer!
    private let queueKey = DispatchSpecificKey<String>()

    override func setUp() async throws {
        server = try TestServer()
        server.route("/ok", response: .text("ok"))
        server.route("/slow", response: .stream((0..<10).map { _ in .init(Data(repeating: 1, count: 100), delay: .milliseconds(30)) }))
        var silent = TestResponse.text("late")
        silent.delayBeforeHead = .seconds(60)  // the tests cancel it long before
        server.route("/silent", response: silent)
    }

    override func tearDown() async throws {
        server.shutdown()
    }

    /// What happened to one task, in order, each with whether it ran on the completion queue.
    private final class Journal: Sendable {
        let entries = Mutex<[(String, Bool)]>([])
        func add(_ line: String, onCompletionQueue: Bool) { entries.withLock { $0.append((line, onCompletionQueue)) } }
        var lines: [String] { entries.withLock { $0.map(\.0) } }
        var allOnCompletionQueue: Bool { entries.withLock { $0.allSatisfy(\.1) } }
    }

    private func observe(_ manager: URLSessionManager, into journal: Journal, task: @escaping @Sendable () -> SessionTask?) -> [any NSObjectProtocol] {
        let key = queueKey
        let here: @Sendable () -> Bool = { DispatchQueue.getSpecific(key: key) == "completion" }
        manager.setTaskDidFinishCollectingMetricsBlock { observed, metrics in
            if observed === task() { journal.add("metrics \(metrics?.transactionMetrics.count ?? -1)", onCompletionQueue: here()) }
        }
        manager.setTaskDidCompleteBlock { observed, error in
            if observed === task() { journal.add("complete \(error == nil ? "ok" : "error")", onCompletionQueue: here()) }
        }
        let names: [Notification.Name] = [.taskDidResume, .taskDidSuspend, .taskDidComplete, .downloadTaskDidMoveFileSuccessfully]
        return names.map { name in
            NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { note in
                guard let observed = note.object as? SessionTask, observed === task() else { return }
                journal.add("note \(name.rawValue.split(separator: ".").last ?? "")", onCompletionQueue: here())
            }
        }
    }

    private func manager(monitors: [any EventMonitor] = [], cache: ResponseCache? = nil) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.responseCache = cache
        let manager = URLSessionManager.raw(configuration, eventMonitors: monitors)
        let queue = DispatchQueue(label: "test.completion")
        queue.setSpecific(key: queueKey, value: "completion")
        manager.completionQueue = queue
        return manager
    }

    /// Starts observing `task` into a new journal, then resumes it. Remove the observers when
    /// done.
    private func resumeObserved(_ task: SessionTask, of manager: URLSessionManager) -> (Journal, [any NSObjectProtocol]) {
        let journal = Journal()
        let observers = observe(manager, into: journal) { task }
        task.resume()
        return (journal, observers)
    }

    func testACompletedTaskCallsEachHookAndNotificationOnceAfterItsHandler() async throws {
        for monitors in [[], [RecordingMonitor()]] as [[any EventMonitor]] {
            let manager = manager(monitors: monitors)
            let journal = Journal()
            let box = Mutex<SessionTask?>(nil)
            let observers = observe(manager, into: journal) { box.withLock { $0 } }
            defer { observers.forEach(NotificationCenter.default.removeObserver) }
            let key = queueKey
            let task = manager.dataTask(with: URLRequest(url: try server.url("/ok"))) { _ in
                journal.add("handler", onCompletionQueue: DispatchQueue.getSpecific(key: key) == "completion")
            }
            box.withLock { $0 = task }
            task.resume()
            try await eventually({ journal.lines.count >= 5 }, "the completion's hooks and notifications")
            try await Task.sleep(nanoseconds: 50_000_000)  // nothing else may follow
            XCTAssertEqual(
                journal.lines,
                ["note taskDidResume", "handler", "metrics 1", "complete ok", "note taskDidComplete"], "monitors: \(monitors.count)")
            XCTAssertTrue(journal.allOnCompletionQueue, "every hook and notification on the completion queue")
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
        }
    }

    func testSuspendAndResumeEachPostOnceAndADownloadReportsItsMove() async throws {
        let manager = manager()
        let journal = Journal()
        let box = Mutex<SessionTask?>(nil)
        let observers = observe(manager, into: journal) { box.withLock { $0 } }
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("observer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let task = manager.downloadTask(
            with: URLRequest(url: try server.url("/slow")), destination: { _, _ in destination }, completionHandler: { _ in })
        box.withLock { $0 = task }
        task.resume()
        try await eventually({ task.countOfBytesReceived > 0 }, "bytes arrive")
        task.suspend()
        task.suspend()  // no second notification: it was already suspended
        task.resume()
        try await eventually({ journal.lines.last == "note taskDidComplete" }, "the task completes")
        XCTAssertEqual(
            journal.lines,
            ["note taskDidResume", "note taskDidSuspend", "note taskDidResume", "note downloadTaskDidMoveFileSuccessfully",
             "metrics 1", "complete ok", "note taskDidComplete"])
        // The move is reported where the file is moved: on the operation queue, before the
        // completion handler (as AFNetworking's delegate did); everything else on the
        // completion queue.
        let placed = journal.entries.withLock { $0 }
        XCTAssertEqual(placed.filter { !$0.1 }.map(\.0), ["note downloadTaskDidMoveFileSuccessfully"])
        XCTAssertTrue(FileManager.default.fileExists(atPath: destination.path))
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
    }

    /// A task whose request could not be made (a scheme Curlew does not speak, resume data
    /// that is not resume data) completes inside `resume()`. Its `taskDidResume` still comes
    /// first: an observer that counts running tasks up on one and down on the other (an
    /// activity indicator) must never see the completion of a task it has not seen start.
    func testATaskThatFailsAtResumeStillReportsItsResumeBeforeItsCompletion() async throws {
        let makers: [(String, @Sendable (URLSessionManager) throws -> SessionTask)] = [
            ("unsupported scheme", { manager in
                manager.dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "ftp://127.0.0.1/f"))), completionHandler: nil)
            }),
            ("bad resume data", { manager in
                manager.downloadTask(withResumeData: Data("not resume data".utf8), destination: nil, completionHandler: nil)
            }),
        ]
        for (label, make) in makers {
            let manager = manager()
            let task = try make(manager)
            let (journal, observers) = resumeObserved(task, of: manager)
            defer { observers.forEach(NotificationCenter.default.removeObserver) }
            try await eventually({ journal.lines.last == "note taskDidComplete" }, "\(label): the task completes")
            XCTAssertEqual(
                journal.lines, ["note taskDidResume", "metrics -1", "complete error", "note taskDidComplete"], label)
            XCTAssertTrue(journal.allOnCompletionQueue, label)
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
        }
    }

    /// A data task's `taskDidResume` waits for its completion to carry it to the completion
    /// queue (`StateNotices`), but not for long: a request whose server stays silent still
    /// reports its resume while it runs, carried by the driver.
    func testARequestThatGetsNoAnswerStillReportsItsResumeWhileItRuns() async throws {
        let manager = manager()
        let task = manager.dataTask(with: URLRequest(url: try server.url("/silent")), completionHandler: nil)
        let (journal, observers) = resumeObserved(task, of: manager)
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        try await eventually({ journal.lines == ["note taskDidResume"] }, "the resume, while the server says nothing")
        XCTAssertEqual(task.state, .running)
        XCTAssertTrue(journal.allOnCompletionQueue)
        task.cancel()
        try await eventually({ journal.lines.last == "note taskDidComplete" }, "the task completes")
        XCTAssertEqual(journal.lines, ["note taskDidResume", "metrics 1", "complete error", "note taskDidComplete"])
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
    }

    /// A start that goes to the request adapter first reaches neither the driver nor the
    /// completion queue until the adapter answers, which may take any time (a token refresh):
    /// its `taskDidResume` is posted meanwhile, not held until then.
    func testATaskHeldByItsAdapterReportsItsResumeMeanwhile() async throws {
        let manager = manager()
        let gate = GateAdapter()
        manager.requestAdapter = gate
        let task = manager.dataTask(with: URLRequest(url: try server.url("/ok")), completionHandler: nil)
        let (journal, observers) = resumeObserved(task, of: manager)
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        try await eventually({ gate.calls == 1 && journal.lines == ["note taskDidResume"] }, "the resume, while the adapter holds the request")
        // Suspended and resumed while the driver does not know the task yet: posted too.
        task.suspend()
        try await eventually({ journal.lines.count == 2 }, "the suspend, while the adapter holds the request")
        task.resume()
        try await eventually({ journal.lines.count == 3 }, "the second resume, while the adapter holds the request")
        gate.open()
        try await eventually({ journal.lines.last == "note taskDidComplete" }, "the task completes")
        XCTAssertEqual(
            journal.lines,
            ["note taskDidResume", "note taskDidSuspend", "note taskDidResume", "metrics 1", "complete ok",
             "note taskDidComplete"])
        XCTAssertTrue(journal.allOnCompletionQueue)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
    }

    /// A response the cache answers completes off the driver, on the cache's queue: its
    /// `taskDidResume` still comes first, each notice once.
    func testAnAnswerFromTheResponseCacheComesAfterItsResume() async throws {
        let served = Mutex(0)
        server.route("/cached") { _ in
            served.withLock { $0 += 1 }
            var response = TestResponse.text("kept")
            response.headers.append((name: "Cache-Control", value: "max-age=600"))
            return response
        }
        let manager = manager(cache: ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 0))
        let request = URLRequest(url: try server.url("/cached"))
        for round in ["from the server", "from the cache"] {
            let task = manager.dataTask(with: request) { _ in }  // a body kept: one the cache may store
            let (journal, observers) = resumeObserved(task, of: manager)
            defer { observers.forEach(NotificationCenter.default.removeObserver) }
            try await eventually({ journal.lines.last == "note taskDidComplete" }, "\(round): the task completes")
            XCTAssertEqual(journal.lines.first, "note taskDidResume", round)
            XCTAssertEqual(journal.lines.filter { $0.hasPrefix("note") }, ["note taskDidResume", "note taskDidComplete"], round)
            XCTAssertTrue(journal.allOnCompletionQueue, round)
        }
        XCTAssertEqual(served.withLock { $0 }, 1, "the second answer came from the cache")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
    }

    /// The state notices of a data task come in the order the calls took effect, each once,
    /// before its completion, whether the transfer had started (a pause) or not yet (a task
    /// suspended before the driver attached it), and with nothing else to carry them.
    func testADataTasksSuspendAndResumeArePostedInOrderWhileItRuns() async throws {
        for startedFirst in [true, false] {
            let manager = manager()
            let task = manager.dataTask(with: URLRequest(url: try server.url("/silent")), completionHandler: nil)
            let (journal, observers) = resumeObserved(task, of: manager)
            defer { observers.forEach(NotificationCenter.default.removeObserver) }
            if startedFirst { try await eventually({ journal.lines.count == 1 }, "the first resume") }
            task.suspend()
            task.suspend()  // already suspended: nothing
            let label = startedFirst ? "started first" : "suspended at once"
            try await eventually({ journal.lines.count == 2 }, "\(label): the suspend, with nothing else queued")
            task.resume()
            try await eventually({ journal.lines.count == 3 }, "\(label): the second resume")
            XCTAssertEqual(journal.lines, ["note taskDidResume", "note taskDidSuspend", "note taskDidResume"], label)
            task.cancel()
            try await eventually({ journal.lines.last == "note taskDidComplete" }, "\(label): the task completes")
            XCTAssertEqual(
                journal.lines,
                ["note taskDidResume", "note taskDidSuspend", "note taskDidResume", "metrics 1", "complete error",
                 "note taskDidComplete"], label)
            XCTAssertTrue(journal.allOnCompletionQueue, label)
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
        }
    }

    /// "Body goes to user code" is decided once, when the transfer starts: a data-received
    /// hook removed mid-transfer still gets every chunk of that transfer, and the completion
    /// handler runs after the last of them (it follows the chunks through the operation queue).
    func testTheDataHookAsTheTransferStartedGetsEveryChunkBeforeTheCompletion() async throws {
        let manager = manager()
        let received = Mutex(0)
        let atCompletion = Mutex<Int?>(nil)
        manager.setDataTaskDidReceiveDataBlock { _, chunk in received.withLock { $0 += chunk.count } }
        let task = manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in
            atCompletion.withLock { $0 = received.withLock { $0 } }
        }
        task.resume()
        try await eventually({ received.withLock { $0 } > 0 }, "the first chunk")
        manager.setDataTaskDidReceiveDataBlock(nil)
        try await eventually({ atCompletion.withLock { $0 } != nil }, "the task completes")
        XCTAssertEqual(atCompletion.withLock { $0 }, 1_000, "every chunk reached the hook before the completion handler")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
    }
}
