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

    /// A bin, accepting or not, and a never-sent task to hang outcomes on (with its manager,
    /// which `tearDown` invalidates).
    private func makeBin(accepting: Bool) throws -> (AllocationReturn, SessionTask) {
        let (manager, tasks) = try makeUnsentTasks(1)
        managers.append(manager)
        let bin = AllocationReturn()
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: accepting)
        return (bin, tasks[0])
    }

    /// Hands `count` finished transfers back to `bin` and lets go of them here.
    private func handBack(
        _ count: Int, body: Data?, to bin: AllocationReturn, task: SessionTask,
        heads: inout [WeakBox<HTTPResponseHead>], prepare: (inout [SessionEngine.FinishedTransfer]) -> Void = { _ in }
    ) throws {
        var items = try finished(count, task: task, body: body, heads: &heads)
        prepare(&items)
        items.withUnsafeBufferPointer { bin.handBack($0) }
    }

    private var managers: [URLSessionManager] = []

    override func tearDown() {
        for manager in managers { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        managers.removeAll()
        super.tearDown()
    }

    func testNothingIsKeptWhileTheDriverDoesNotAccept() throws {
        let (bin, task) = try makeBin(accepting: false)
        var heads: [WeakBox<HTTPResponseHead>] = []
        try handBack(3, body: Data("abc".utf8), to: bin, task: task, heads: &heads)
        XCTAssertTrue(heads.allSatisfy { $0.value == nil }, "a bin that does not accept kept a head")
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: false)
        XCTAssertTrue(spare.isEmpty)
    }

    func testHandedBackPartsLiveUntilTheDriverCollectsThem() throws {
        let (bin, task) = try makeBin(accepting: true)
        var heads: [WeakBox<HTTPResponseHead>] = []
        try handBack(3, body: Data("abc".utf8), to: bin, task: task, heads: &heads)
        XCTAssertTrue(heads.allSatisfy { $0.value != nil }, "the bin holds the last references")
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: false)
        XCTAssertEqual(spare.count, 3)
        XCTAssertEqual(spare.first?.body, Data("abc".utf8))
        XCTAssertNotNil(spare.first?.metrics)
        spare.removeAll(keepingCapacity: true)  // what the driver does: the last release, there
        XCTAssertTrue(heads.allSatisfy { $0.value == nil })

        // Not accepting any more: a later hand-back keeps nothing.
        try handBack(2, body: nil, to: bin, task: task, heads: &heads)
        XCTAssertTrue(heads.allSatisfy { $0.value == nil })
        bin.collect(into: &spare, accepting: true)
        XCTAssertTrue(spare.isEmpty)
    }

    /// A head whose Foundation response was built, a large body, and bodies past the budget
    /// stay with the completion queue.
    func testBuiltResponsesAndLargeBodiesAreNotTaken() throws {
        let (bin, task) = try makeBin(accepting: true)
        var heads: [WeakBox<HTTPResponseHead>] = []
        let large = Data(count: AllocationReturn.largestBody + 1)
        let largest = Data(count: AllocationReturn.largestBody)
        // Two with a body over the largest size (the first's Foundation response built), then
        // enough of the largest size to pass the budget by one.
        let fitting = AllocationReturn.bodyBudget / AllocationReturn.largestBody
        try handBack(2, body: large, to: bin, task: task, heads: &heads) { items in
            _ = items[0].outcome.head?.httpURLResponse
        }
        try handBack(fitting + 1, body: largest, to: bin, task: task, heads: &heads)
        XCTAssertNil(heads[0].value, "a head with a built Foundation response was kept")
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: false)
        XCTAssertEqual(spare.count, heads.count, "every item has metrics to hand back")
        XCTAssertNil(spare[0].head)
        XCTAssertNil(spare[1].body, "a body over the largest size was kept")
        XCTAssertNotNil(spare[1].head)
        let keptBodies = spare.compactMap(\.body)
        XCTAssertEqual(keptBodies.count, fitting)
        XCTAssertLessThanOrEqual(keptBodies.reduce(0) { $0 + $1.count }, AllocationReturn.bodyBudget)
    }

    func testAtMostCapacityRequestsWait() throws {
        let (bin, task) = try makeBin(accepting: true)
        var heads: [WeakBox<HTTPResponseHead>] = []
        try handBack(AllocationReturn.capacity + 5, body: nil, to: bin, task: task, heads: &heads)
        XCTAssertEqual(heads.filter { $0.value != nil }.count, AllocationReturn.capacity)
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: true)
        XCTAssertEqual(spare.count, AllocationReturn.capacity)
    }

    /// A monitor's delivery hands back the heads, bodies and metrics its events held (it is
    /// often the last to let go of them), with the same filters: a head a monitor had built a
    /// Foundation response for stays where it is.
    func testAMonitorsDeliveryHandsBackWhatItsEventsHeld() throws {
        let (bin, task) = try makeBin(accepting: true)
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
            hub.emit(.received(task, plainHead))
            hub.emit(.received(task, builtHead))
        }
        wait(for: [heard], timeout: 30)
        monitor.queue.sync {}  // the delivery block, and its hand-back, finished
        XCTAssertNil(built?.value, "a head with a built Foundation response was handed back")
        XCTAssertNotNil(plain?.value, "the bin holds the monitor's last reference")
        var spare: [AllocationReturn.Parts] = []
        bin.collect(into: &spare, accepting: false)
        XCTAssertEqual(spare.count, 1)
        XCTAssertTrue(spare.first?.head === plain?.value)
        spare.removeAll()
        XCTAssertNil(plain?.value)
    }

    /// A manager with 16 connections to the test peer.
    private func makeManager() -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 16
        return URLSessionManager.raw(configuration)
    }

    /// Runs `count` GETs on `manager` to their end; their heads, weakly watched from the handlers.
    private func finishGETs(_ count: Int, on manager: URLSessionManager) async throws -> [WeakBox<HTTPResponseHead>] {
        let heads = Mutex<[WeakBox<HTTPResponseHead>]>([])
        let done = expectation(description: "\(count) GETs")
        done.expectedFulfillmentCount = count
        for index in 0..<count {
            manager.dataTask(with: URLRequest(url: try Peer.url("/get?n=\(index)"))) { response in
                XCTAssertNil(response.error)
                if let head = response.head { heads.withLock { $0.append(WeakBox(head)) } }
                done.fulfill()
            }.resume()
        }
        await fulfillment(of: [done], timeout: 60)
        return heads.withLock { $0 }
    }

    /// Through a manager: 32 requests, 16 in flight, their heads watched from the handlers.
    /// Once they have all finished, the idle manager (alive, its driver asleep) keeps none of
    /// them: the driver frees what it was handed before it sleeps without transfers, and
    /// accepts nothing more until it has transfers again.
    func testAnIdleManagerKeepsNoFinishedResponse() async throws {
        let manager = makeManager()
        let heads = try await finishGETs(32, on: manager)
        manager.completionQueue.sync {}  // the last block's hand-back ran
        XCTAssertEqual(heads.count, 32)
        // Bounded: the driver reaches its sleep within moments of its last transfer, and
        // stops accepting before it sleeps.
        let bin = manager.engine.allocationReturn
        var alive = 32
        var idle = false
        for _ in 0..<400 {
            alive = heads.filter { $0.value != nil }.count
            idle = !bin.isAccepting && bin.waitingCount == 0
            if alive == 0 && idle { break }
            try await Task.sleep(nanoseconds: 25_000_000)
        }
        XCTAssertEqual(alive, 0, "finished responses outlived their requests in an idle manager")
        XCTAssertTrue(idle, "an idle driver still accepts hand-backs (\(bin.waitingCount) waiting)")
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// Cancel and invalidation meet the hand-back: requests cancelled in flight by the
    /// manager's invalidation complete while the driver tears down. Once the manager is
    /// invalidated its bin accepts nothing and holds nothing, and the heads of the requests
    /// that had finished before are gone.
    func testAnInvalidatedManagerHoldsNothingBack() async throws {
        let manager = makeManager()
        let heads = try await finishGETs(8, on: manager)
        let cancelled = expectation(description: "8 slow GETs cancelled")
        cancelled.expectedFulfillmentCount = 8
        for _ in 0..<8 {
            manager.dataTask(with: URLRequest(url: try Peer.url("/delay/10"))) { response in
                XCTAssertNotNil(response.error)
                cancelled.fulfill()
            }.resume()
        }
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await fulfillment(of: [cancelled], timeout: 60)
        await manager.waitUntilInvalidated()
        manager.completionQueue.sync {}  // every completion block, and its hand-back, ran
        let bin = manager.engine.allocationReturn
        XCTAssertFalse(bin.isAccepting, "a torn-down driver still accepts hand-backs")
        XCTAssertEqual(bin.waitingCount, 0, "parts wait for a driver that is gone")
        XCTAssertEqual(heads.filter { $0.value != nil }.count, 0)
    }
}
