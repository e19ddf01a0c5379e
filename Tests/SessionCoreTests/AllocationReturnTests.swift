import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `AllocationReturn`: the heads, bodies and metrics the driver made for finished requests go
/// back to it to be freed, only while it accepts them, and never wait through an idle manager.
final class AllocationReturnTests: XCTestCase {
    private func head(_ url: URL) -> HTTPResponseHead {
        HTTPResponseHead(url: url, statusCode: 200, fields: [("Content-Length", "3")])
    }

    /// Finished transfers of `task`, each with a head of its own (weakly watched) and `body`.
    private func finished(
        _ count: Int, task: SessionTask, body: Data?, heads: inout [WeakBox<HTTPResponseHead>]
    ) throws -> [SessionEngine.FinishedTransfer] {
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:9/finished"))
        return (0..<count).map { _ in
            let made = head(url)
            heads.append(WeakBox(made))
            return SessionEngine.FinishedTransfer(
                task: task, outcome: TransferOutcome(error: nil, request: nil, head: made, body: body, metrics: .empty()))
        }
    }

    func testNothingIsKeptWhileTheDriverDoesNotAccept() throws {
        let (manager, tasks) = try makeUnsentTasks(1)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let bin = AllocationReturn()
        var heads: [WeakBox<HTTPResponseHead>] = []
        do {
            let items = try finished(3, task: tasks[0], body: Data("abc".utf8), heads: &heads)
            items.withUnsafeBufferPointer { bin.handBack($0) }
        }
        XCTAssertTrue(heads.allSatisfy { $0.value == nil }, "a bin that does not accept kept a head")
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: false)
        XCTAssertTrue(spare.isEmpty)
    }

    func testHandedBackPartsLiveUntilTheDriverCollectsThem() throws {
        let (manager, tasks) = try makeUnsentTasks(1)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let bin = AllocationReturn()
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: true)
        var heads: [WeakBox<HTTPResponseHead>] = []
        do {
            let items = try finished(3, task: tasks[0], body: Data("abc".utf8), heads: &heads)
            items.withUnsafeBufferPointer { bin.handBack($0) }
        }
        XCTAssertTrue(heads.allSatisfy { $0.value != nil }, "the bin holds the last references")
        bin.collect(into: &spare, accepting: false)
        XCTAssertEqual(spare.count, 3)
        XCTAssertEqual(spare.first?.body, Data("abc".utf8))
        XCTAssertNotNil(spare.first?.metrics)
        spare.removeAll(keepingCapacity: true)  // what the driver does: the last release, there
        XCTAssertTrue(heads.allSatisfy { $0.value == nil })

        // Not accepting any more: a later hand-back keeps nothing.
        do {
            let items = try finished(2, task: tasks[0], body: nil, heads: &heads)
            items.withUnsafeBufferPointer { bin.handBack($0) }
        }
        XCTAssertTrue(heads.allSatisfy { $0.value == nil })
        bin.collect(into: &spare, accepting: true)
        XCTAssertTrue(spare.isEmpty)
    }

    /// A head whose Foundation response was built, a large body, and bodies past the budget
    /// stay with the completion queue.
    func testBuiltResponsesAndLargeBodiesAreNotTaken() throws {
        let (manager, tasks) = try makeUnsentTasks(1)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let bin = AllocationReturn()
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: true)
        var heads: [WeakBox<HTTPResponseHead>] = []
        let large = Data(count: AllocationReturn.largestBody + 1)
        let largest = Data(count: AllocationReturn.largestBody)
        do {
            var items = try finished(2, task: tasks[0], body: large, heads: &heads)
            _ = items[0].outcome.head?.httpURLResponse
            // Enough bodies of the largest size taken to pass the budget by one.
            items += try finished(AllocationReturn.bodyBudget / AllocationReturn.largestBody + 1, task: tasks[0], body: largest, heads: &heads)
            items.withUnsafeBufferPointer { bin.handBack($0) }
        }
        XCTAssertNil(heads[0].value, "a head with a built Foundation response was kept")
        bin.collect(into: &spare, accepting: false)
        XCTAssertEqual(spare.count, heads.count, "every item has metrics to hand back")
        XCTAssertNil(spare[0].head)
        XCTAssertNil(spare[1].body, "a body over the largest size was kept")
        XCTAssertNotNil(spare[1].head)
        let keptBodies = spare.compactMap(\.body)
        XCTAssertEqual(keptBodies.count, AllocationReturn.bodyBudget / AllocationReturn.largestBody)
        XCTAssertLessThanOrEqual(keptBodies.reduce(0) { $0 + $1.count }, AllocationReturn.bodyBudget)
    }

    func testAtMostCapacityRequestsWait() throws {
        let (manager, tasks) = try makeUnsentTasks(1)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let bin = AllocationReturn()
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: true)
        var heads: [WeakBox<HTTPResponseHead>] = []
        do {
            let items = try finished(AllocationReturn.capacity + 5, task: tasks[0], body: nil, heads: &heads)
            items.withUnsafeBufferPointer { bin.handBack($0) }
        }
        XCTAssertEqual(heads.filter { $0.value != nil }.count, AllocationReturn.capacity)
        bin.collect(into: &spare, accepting: true)
        XCTAssertEqual(spare.count, AllocationReturn.capacity)
    }

    /// A monitor's delivery hands back the heads, bodies and metrics its events held (it is
    /// often the last to let go of them), with the same filters: a head a monitor had built a
    /// Foundation response for stays where it is.
    func testAMonitorsDeliveryHandsBackWhatItsEventsHeld() throws {
        let (manager, tasks) = try makeUnsentTasks(1)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let bin = AllocationReturn()
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: true)
        let heard = expectation(description: "the monitor heard both heads")
        heard.expectedFulfillmentCount = 2
        let monitor = RecordingMonitor(foundationResponses: false) { _ in heard.fulfill() }
        let hub = try XCTUnwrap(MonitorHub(monitors: [monitor], allocationReturn: bin))
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:9/monitored"))
        var plain: WeakBox<HTTPResponseHead>?
        var built: WeakBox<HTTPResponseHead>?
        do {
            let plainHead = head(url)
            let builtHead = head(url)
            _ = builtHead.httpURLResponse
            plain = WeakBox(plainHead)
            built = WeakBox(builtHead)
            hub.emit(.received(tasks[0], plainHead))
            hub.emit(.received(tasks[0], builtHead))
        }
        wait(for: [heard], timeout: 30)
        monitor.queue.sync {}  // the delivery block, and its hand-back, finished
        XCTAssertNil(built?.value, "a head with a built Foundation response was handed back")
        XCTAssertNotNil(plain?.value, "the bin holds the monitor's last reference")
        bin.collect(into: &spare, accepting: false)
        XCTAssertEqual(spare.count, 1)
        XCTAssertTrue(spare.first?.head === plain?.value)
        spare.removeAll()
        XCTAssertNil(plain?.value)
    }

    /// Through a manager: 32 requests, 16 in flight, their heads watched from the handlers.
    /// Once they have all finished, the idle manager (alive, its driver asleep) keeps none of
    /// them: the driver frees what it was handed before it sleeps without transfers, and
    /// accepts nothing more until it has transfers again.
    func testAnIdleManagerKeepsNoFinishedResponse() async throws {
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 16
        let manager = URLSessionManager.raw(configuration)
        let heads = Mutex<[WeakBox<HTTPResponseHead>]>([])
        let done = expectation(description: "32 GETs")
        done.expectedFulfillmentCount = 32
        for index in 0..<32 {
            let request = URLRequest(url: try Peer.url("/get?n=\(index)"))
            manager.dataTask(with: request) { response in
                XCTAssertNil(response.error)
                if let head = response.head { heads.withLock { $0.append(WeakBox(head)) } }
                done.fulfill()
            }.resume()
        }
        await fulfillment(of: [done], timeout: 60)
        manager.completionQueue.sync {}  // the last block's hand-back ran
        XCTAssertEqual(heads.withLock { $0.count }, 32)
        // Bounded: the driver reaches its sleep within moments of its last transfer, and
        // stops accepting before it sleeps.
        let bin = manager.engine.allocationReturn
        var alive = 32
        var idle = false
        for _ in 0..<400 {
            alive = heads.withLock { $0.filter { $0.value != nil }.count }
            idle = !bin.isAccepting && bin.waitingCount == 0
            if alive == 0 && idle { break }
            try await Task.sleep(nanoseconds: 25_000_000)
        }
        XCTAssertEqual(alive, 0, "finished responses outlived their requests in an idle manager")
        XCTAssertTrue(idle, "an idle driver still accepts hand-backs (\(bin.waitingCount) waiting)")
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
