import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `TaskRegistry` alone (slots reserved, filled, freed and used again), then the manager's use
/// of it: `tasks` lists what is registered, and a finished task leaves it.
final class TaskRegistryTests: XCTestCase {
    func testAFreedSlotIsUsedAgainAndTheRestStayRegistered() throws {
        let (manager, tasks) = try makeUnsentTasks(3)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        // The manager's own registry gave these tasks slots 0, 1, 2: a fresh one gives the same.
        XCTAssertEqual(tasks.map(\.registrySlot), [0, 1, 2])
        var registry = TaskRegistry()
        for task in tasks { registry.fill(registry.reserveSlot(), with: task) }
        XCTAssertEqual(registry.count, 3)

        registry.remove(tasks[1])
        XCTAssertEqual(registry.count, 2)
        XCTAssertEqual(Set(registry.tasks.map(\.taskIdentifier)), [tasks[0].taskIdentifier, tasks[2].taskIdentifier])
        XCTAssertEqual(registry.identifiers, [tasks[0].taskIdentifier, tasks[2].taskIdentifier])
        XCTAssertEqual(registry.reserveSlot(), 1, "the freed slot comes first")
        XCTAssertEqual(registry.reserveSlot(), 3, "then a new one")
    }

    func testRemovingATaskWhoseSlotHoldsAnotherLeavesThatOne() throws {
        let (manager, tasks) = try makeUnsentTasks(2)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        var registry = TaskRegistry()
        let slot = registry.reserveSlot()
        XCTAssertEqual(slot, tasks[0].registrySlot)
        registry.fill(slot, with: tasks[0])
        registry.remove(tasks[0])
        // The slot is another task's now; the first task's late removal (a second completion
        // path, or a task that was never registered) must not take it out.
        registry.fill(registry.reserveSlot(), with: tasks[1])
        registry.remove(tasks[0])
        XCTAssertEqual(registry.count, 1)
        XCTAssertTrue(registry.tasks.first === tasks[1])
        registry.remove(tasks[0])
        XCTAssertEqual(registry.count, 1, "removing twice changes nothing")
    }

    func testAReservedSlotGivenBackUnfilledIsUsedAgain() {
        var registry = TaskRegistry()
        let first = registry.reserveSlot()
        registry.release(first)
        XCTAssertEqual(registry.reserveSlot(), first)
        XCTAssertEqual(registry.count, 0)
        XCTAssertTrue(registry.tasks.isEmpty)
        registry.release(99)  // never reserved: nothing happens
        XCTAssertEqual(registry.reserveSlot(), 1)
    }

    /// Through the manager: tasks are listed in creation order until their completion, then
    /// leave; the slot they leave is taken by the next task, which is listed like any other.
    func testTheManagerListsItsTasksUntilEachCompletes() throws {
        let (manager, tasks) = try makeUnsentTasks(3)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (first, second, third) = (tasks[0], tasks[1], tasks[2])
        XCTAssertEqual(manager.tasks.map(\.taskIdentifier), [first, second, third].map(\.taskIdentifier))

        let done = expectation(description: "the second task completed")
        let observer = NotificationCenter.default.addObserver(forName: .taskDidComplete, object: second, queue: nil) { _ in
            done.fulfill()
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        second.cancel()
        wait(for: [done], timeout: 10)
        // The notification comes after the task left the registry.
        XCTAssertEqual(manager.tasks.map(\.taskIdentifier), [first, third].map(\.taskIdentifier))

        let fourth = manager.dataTask(with: try XCTUnwrap(first.originalRequest), completionHandler: nil)
        XCTAssertEqual(fourth.registrySlot, second.registrySlot, "the freed slot is used again")
        XCTAssertEqual(manager.tasks.map(\.taskIdentifier), [first, third, fourth].map(\.taskIdentifier))
    }
}
