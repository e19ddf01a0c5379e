import XCTest
@testable import SessionCore

final class TaskLifecycleTests: XCTestCase {
    func testNewTaskIsSuspendedAndResumeStartsIt() {
        var lifecycle = TaskLifecycle()
        XCTAssertEqual(lifecycle.state, .suspended)
        XCTAssertEqual(lifecycle.resume(), .start)
        XCTAssertEqual(lifecycle.state, .running)
        XCTAssertEqual(lifecycle.resume(), .none, "a second resume does nothing")
    }

    func testSuspendAndResumeAfterStartPauseAndUnpause() {
        var lifecycle = TaskLifecycle()
        XCTAssertEqual(lifecycle.suspend(), .none, "suspending a task that never ran changes nothing")
        _ = lifecycle.resume()
        XCTAssertEqual(lifecycle.suspend(), .pause)
        XCTAssertEqual(lifecycle.state, .suspended)
        XCTAssertEqual(lifecycle.resume(), .unpause)
    }

    func testCancelBeforeStartCompletesWithoutATransfer() {
        var lifecycle = TaskLifecycle()
        XCTAssertEqual(lifecycle.cancel(), .completeWithoutTransfer)
        XCTAssertEqual(lifecycle.state, .canceling)
        XCTAssertEqual(lifecycle.resume(), .none, "a cancelled task never starts")
        XCTAssertEqual(lifecycle.cancel(), .none)
    }

    func testCancelWhileRunningOrSuspendedCancelsTheTransfer() {
        var running = TaskLifecycle()
        _ = running.resume()
        XCTAssertEqual(running.cancel(), .cancelTransfer)
        var suspended = TaskLifecycle()
        _ = suspended.resume()
        _ = suspended.suspend()
        XCTAssertEqual(suspended.cancel(), .cancelTransfer)
    }

    func testCompletionHappensExactlyOnce() {
        var lifecycle = TaskLifecycle()
        _ = lifecycle.resume()
        XCTAssertTrue(lifecycle.complete())
        XCTAssertFalse(lifecycle.complete())
        XCTAssertEqual(lifecycle.state, .completed)
        XCTAssertEqual(lifecycle.cancel(), .none)
        XCTAssertEqual(lifecycle.resume(), .none)
        XCTAssertEqual(lifecycle.suspend(), .none)
    }
}
