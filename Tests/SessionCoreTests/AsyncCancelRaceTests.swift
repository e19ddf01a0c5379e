import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Swift `Task` cancellation racing the end of an async call whose continuation the driver
/// resumes where the transfer ends (`TaskOptions.resumesDirectly`), while the completion
/// queue runs the rest: every call returns exactly once (a second resume of the continuation
/// would trap, none would hang), with the body or a cancellation, and no task stays.
final class AsyncCancelRaceTests: XCTestCase {
    private enum Outcome: Equatable {
        case body
        case cancelled
        case other(String)
    }

    private var server: TestServer!

    override func setUp() async throws {
        server = try TestServer()
        server.route("/quick", response: .text("ok"))
    }

    override func tearDown() async throws { server.shutdown() }

    /// 3,000 `data(for:)` calls, 100 at a time, each in a task of its own. A third are
    /// cancelled before the call begins (the cancel side, by construction), a third only once
    /// the call returned (a no-op: the body side, by construction), a third from the test
    /// after a spin of 0 to 63 iterations while the call runs (the race).
    func testCancellingDataForRacingItsDirectResume() async throws {
        let manager = URLSessionManager.raw()
        let request = URLRequest(url: try server.url("/quick"))
        let total = 3_000
        var outcomes: [Outcome] = []
        for start in stride(from: 0, to: total, by: 100) {
            let window = await withTaskGroup(of: (Int, Outcome).self) { group in
                for index in start..<(start + 100) {
                    group.addTask {
                        let call = Task { () throws -> Data in
                            if index % 3 == 0 { withUnsafeCurrentTask { $0?.cancel() } }
                            return try await manager.data(for: request).0
                        }
                        if index % 3 == 2 {
                            var spin = 0
                            for _ in 0..<(index % 64) { spin &+= 1 }
                            withExtendedLifetime(spin) { call.cancel() }
                        }
                        let result = await call.result
                        if index % 3 == 1 { call.cancel() }
                        switch result {
                        case .success(let body): return (index, body == Data("ok".utf8) ? .body : .other("body \(body)"))
                        case .failure(let error as SessionError) where error == .cancelled: return (index, .cancelled)
                        case .failure(let error): return (index, .other("\(error)"))
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            XCTAssertEqual(window.count, 100)
            for (index, outcome) in window {
                switch index % 3 {
                case 0: XCTAssertEqual(outcome, .cancelled, "call \(index), cancelled before it began")
                case 1: XCTAssertEqual(outcome, .body, "call \(index), cancelled after it returned")
                default: XCTAssertTrue(outcome == .body || outcome == .cancelled, "call \(index): \(outcome)")
                }
            }
            outcomes += window.map(\.1)
        }
        XCTAssertEqual(outcomes.count, total)
        // A call cancelled before it began sends nothing; only the other two thirds may have.
        XCTAssertLessThanOrEqual(server.requests.count, total - total / 3, "a call cancelled before it began sent its request")
        let raced = outcomes.enumerated().filter { $0.offset % 3 == 2 }.map(\.element)
        print("racing cancels: \(raced.filter { $0 == .cancelled }.count) won, \(raced.filter { $0 == .body }.count) lost")
        try await eventually({ manager.tasks.isEmpty }, "tasks left in the manager: \(manager.tasks.count)")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
