import Dispatch
import Synchronization
import XCTest
@testable import SessionCore

/// `CompletionBatch`: the driver's completions of one pass go to their queue together, in
/// the order they were added.
final class CompletionBatchTests: XCTestCase {
    func testItemsRunInOrderAfterTheFlushOnly() {
        let queue = DispatchQueue(label: "batch-test")
        let ran = Mutex<[Int]>([])
        let done = expectation(description: "all ran")
        done.expectedFulfillmentCount = 50
        let batch = CompletionBatch<Int> { number in
            ran.withLock { $0.append(number) }
            done.fulfill()
        }
        for number in 0..<50 {
            batch.add(number, on: queue, kind: .own)
        }
        queue.sync {}  // anything already sent would have run by now
        XCTAssertEqual(ran.withLock { $0 }, [], "nothing is sent before the flush")
        batch.flush()
        wait(for: [done], timeout: 30)
        XCTAssertEqual(ran.withLock { $0 }, Array(0..<50))
        batch.flush()  // an empty batch sends nothing
        queue.sync {}
        XCTAssertEqual(ran.withLock { $0 }.count, 50)
    }

    func testAnotherQueueSendsWhatCameBeforeFirst() {
        let first = DispatchQueue(label: "batch-test-1")
        let second = DispatchQueue(label: "batch-test-2")
        let ran = Mutex<[String]>([])
        let batch = CompletionBatch<String> { name in ran.withLock { $0.append(name) } }
        batch.add("a", on: first, kind: .own)
        batch.add("b", on: first, kind: .own)
        batch.add("c", on: second, kind: .own)
        first.sync {}
        XCTAssertEqual(ran.withLock { $0 }, ["a", "b"], "the change of queue sent the first queue's items")
        second.sync {}
        XCTAssertEqual(ran.withLock { $0 }, ["a", "b"], "the second queue's item waits for the flush")
        batch.flush()
        second.sync {}
        XCTAssertEqual(ran.withLock { $0 }, ["a", "b", "c"])
    }

    /// A retired object lives until its pass's items have run, whether the pass finished one
    /// transfer (the item and the object ride in the block) or several; the batch keeps
    /// working pass after pass. (Where it is freed is not asserted: normally on the queue, but
    /// the caller's own reference to the block goes when `async` returns, so a block that has
    /// already run by then is freed on the caller's thread — seen under ThreadSanitizer.)
    func testRetiredObjectsLiveUntilTheirItemsRan() {
        let queue = DispatchQueue(label: "batch-test-retire")
        let log = Mutex<[String]>([])
        let batch = CompletionBatch<Int> { number in log.withLock { $0.append("item \(number)") } }
        for itemsInPass in [1, 1, 3, 1] {
            let pass = log.withLock { $0.count }
            for number in 0..<itemsInPass {
                batch.add(number, on: queue, kind: .own)
            }
            batch.retire(Retired { log.withLock { $0.append("freed") } })
            batch.flush()
            queue.sync {}
            let entries = log.withLock { Array($0[pass...]) }
            XCTAssertEqual(entries, (0..<itemsInPass).map { "item \($0)" } + ["freed"], "a pass of \(itemsInPass)")
        }
    }

    /// `delivered` gets a block's items once every one of them was delivered, in order, on
    /// the queue: a lone item (one request at a time) and a batch alike.
    func testDeliveredSeesTheBlocksItemsAfterTheyAllRan() {
        let queue = DispatchQueue(label: "batch-test-delivered")
        let log = Mutex<[String]>([])
        let batch = CompletionBatch<Int>(
            deliver: { number in log.withLock { $0.append("item \(number)") } },
            delivered: { numbers in
                let list = numbers.map(String.init).joined(separator: ",")
                log.withLock { $0.append("delivered \(list)") }
            })
        batch.add(7, on: queue, kind: .own)
        batch.flush()
        queue.sync {}
        for number in 0..<3 { batch.add(number, on: queue, kind: .own) }
        batch.flush()
        queue.sync {}
        XCTAssertEqual(
            log.withLock { $0 },
            ["item 7", "delivered 7", "item 0", "item 1", "item 2", "delivered 0,1,2"])
    }

    /// On Linux `DispatchQueue.main` is a new object at every use (`===` never matches it):
    /// the main queue is recognised all the same, and a queue of the caller's is not batched.
    /// One completion per pass may resume its caller from the driver; every flush (a pass's
    /// end, with or without items) allows the next one.
    func testOneDirectResumePerPass() {
        let queue = DispatchQueue(label: "batch-test-direct")
        let batch = CompletionBatch<Int> { _ in }
        XCTAssertTrue(batch.claimDirectResume())
        XCTAssertFalse(batch.claimDirectResume())
        batch.add(1, on: queue, kind: .own)
        XCTAssertFalse(batch.claimDirectResume(), "still the same pass")
        batch.flush()
        XCTAssertTrue(batch.claimDirectResume(), "a new pass")
        batch.flush()  // nothing gathered (the item went another way): still a pass's end
        XCTAssertTrue(batch.claimDirectResume())
        queue.sync {}
    }

    func testTheMainQueueIsRecognisedThoughEveryUseIsANewObject() {
        let own = DispatchQueue(label: "batch-test-own")
        XCTAssertEqual(CompletionQueueKind(own, own: own), .own)
        XCTAssertEqual(CompletionQueueKind(DispatchQueue.main, own: own), .main)
        XCTAssertEqual(CompletionQueueKind(DispatchQueue(label: "batch-test-other"), own: own), .other)
        XCTAssertEqual(CompletionQueueKind(DispatchQueue.global(), own: own), .other)
    }
}

/// Tells when it is freed.
private final class Retired: Sendable {
    let report: @Sendable () -> Void

    init(_ report: @escaping @Sendable () -> Void) { self.report = report }

    deinit { report() }
}
