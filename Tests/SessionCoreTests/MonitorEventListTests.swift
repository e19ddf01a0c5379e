import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The list a monitor's pending events wait in (`MonitorEventList`): order kept across its
/// growth, every event handed out once, and each released as soon as its call returns or
/// the list goes.
final class MonitorEventListTests: XCTestCase {
    private var manager: URLSessionManager!

    override func setUp() {
        manager = URLSessionManager.raw()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    private func task() throws -> SessionTask {
        manager.dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "http://127.0.0.1:9/")))) { _ in }
    }

    private static func identifier(_ event: MonitorEvent) -> Int {
        guard case .cancelled(let task) = event else { return -1 }
        return task.taskIdentifier
    }

    func testEventsComeOutInOrderOnceAcrossGrowthAndBatches() throws {
        let list = MonitorEventList(capacity: 2)
        var expected: [Int] = []
        for _ in 0..<40 {
            let task = try task()
            expected.append(task.taskIdentifier)
            list.append(.cancelled(task))
        }
        XCTAssertEqual(list.count, 40)
        var seen: [Int] = []
        list.drain { seen.append(Self.identifier($0)) }
        XCTAssertEqual(seen, expected)
        XCTAssertEqual(list.count, 0)
        list.drain { _ in XCTFail("an event was handed out twice") }

        // The emptied list takes the next batch.
        let next = try task()
        list.append(.cancelled(next))
        seen = []
        list.drain { seen.append(Self.identifier($0)) }
        XCTAssertEqual(seen, [next.taskIdentifier])
    }

    /// A completion event whose box only the list holds.
    private func completion() throws -> MonitorEvent.Completion {
        let response = DataResponse(request: nil, head: nil, data: nil, fileURL: nil, metrics: nil, result: .success(Data()))
        return MonitorEvent.Completion(try task(), .empty(), nil, response)
    }

    func testEachEventIsReleasedWhenItsCallReturns() throws {
        let list = MonitorEventList()
        weak var first: MonitorEvent.Completion?
        weak var second: MonitorEvent.Completion?
        do {
            let one = try completion()
            let two = try completion()
            first = one
            second = two
            list.append(.finished(one))
            list.append(.finished(two))
        }
        XCTAssertNotNil(first, "the list holds its events")
        var calls = 0
        list.drain { event in
            calls += 1
            if calls == 2 { XCTAssertNil(first, "the first event was released after its call") }
            XCTAssertNotNil(second, "the second event is alive until its call")
            _ = event
        }
        XCTAssertEqual(calls, 2)
        XCTAssertNil(second, "the last event was released after its call")
    }

    func testEventsLeftInTheListAreReleasedWithIt() throws {
        weak var pending: MonitorEvent.Completion?
        do {
            let list = MonitorEventList()
            let box = try completion()
            pending = box
            list.append(.finished(box))
            XCTAssertNotNil(pending)
        }
        XCTAssertNil(pending)
    }
}
