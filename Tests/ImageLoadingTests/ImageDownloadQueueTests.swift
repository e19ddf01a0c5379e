import Foundation
import SessionCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// `ImageDownloadQueue`, the downloader's bookkeeping, as a plain value: start order (FIFO,
/// LIFO, priority), the active limit, merging and cancellation. Its tasks are never resumed:
/// the queue only hands them back, so no transfer is involved.
final class ImageDownloadQueueTests: XCTestCase {
    private var manager: HTTPSessionManager!

    override func setUp() {
        manager = HTTPSessionManager(baseURL: nil)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A handler with a fresh receipt ID.
    private func handler() throws -> ImageDownloadHandler {
        ImageDownloadHandler(
            receiptID: UUID(), request: URLRequest(url: try XCTUnwrap(URL(string: "http://127.0.0.1:9/x"))),
            success: nil, failure: nil)
    }

    /// Registers a new download for `key` (with one handler) and returns it and whether it may
    /// start now.
    @discardableResult
    private func add(_ key: String, to queue: inout ImageDownloadQueue, priority: Float? = nil) throws -> (download: MergedImageDownload, started: Bool) {
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:9/\(key)"))
        let task = manager.dataTask(with: URLRequest(url: url), uploadProgress: nil, downloadProgress: nil) { _ in }
        if let priority { task.priority = priority }
        let download = MergedImageDownload(id: queue.makeID(), urlIdentifier: key, task: task, handlers: [try handler()])
        return (download, queue.add(download))
    }

    /// Finishes downloads one at a time, `first` first, and returns the keys in the order
    /// they were started (the queue never starts more than one here).
    private func startOrder(after first: MergedImageDownload, in queue: inout ImageDownloadQueue, by id: [ObjectIdentifier: (UInt64, String)]) -> [String] {
        var order: [String] = []
        var current = (first.id, first.urlIdentifier)
        for _ in 0..<id.count {  // bounded: each round starts at most one download
            let (_, start) = queue.finish(current.0, for: current.1)
            guard let next = start.first, let known = id[ObjectIdentifier(next)] else { break }
            XCTAssertEqual(start.count, 1)
            order.append(known.1)
            current = known
        }
        return order
    }

    private func index(_ downloads: [MergedImageDownload]) -> [ObjectIdentifier: (UInt64, String)] {
        Dictionary(uniqueKeysWithValues: downloads.map { (ObjectIdentifier($0.task), ($0.id, $0.urlIdentifier)) })
    }

    func testFIFOStartsTheOldestWaitingDownloadFirst() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 1)
        let downloads = try ["a", "b", "c", "d"].map { try add($0, to: &queue) }
        XCTAssertEqual(downloads.map(\.started), [true, false, false, false])
        XCTAssertEqual(queue.waiting, ["b", "c", "d"])
        let order = startOrder(after: downloads[0].download, in: &queue, by: index(downloads.map(\.download)))
        XCTAssertEqual(order, ["b", "c", "d"])
        XCTAssertTrue(queue.merged.isEmpty && queue.waiting.isEmpty && queue.active.isEmpty, "nothing left behind")
    }

    func testLIFOStartsTheNewestWaitingDownloadFirst() throws {
        var queue = ImageDownloadQueue(prioritization: .lifo, maximumActiveDownloads: 1)
        let downloads = try ["a", "b", "c", "d"].map { try add($0, to: &queue) }
        let order = startOrder(after: downloads[0].download, in: &queue, by: index(downloads.map(\.download)))
        XCTAssertEqual(order, ["d", "c", "b"])
    }

    func testAHigherTaskPriorityGoesFirstInEitherOrder() throws {
        for prioritization in [ImageDownloadPrioritization.fifo, .lifo] {
            var queue = ImageDownloadQueue(prioritization: prioritization, maximumActiveDownloads: 1)
            let downloads = [
                try add("a", to: &queue), try add("low", to: &queue, priority: 0.1),
                try add("normal", to: &queue), try add("high", to: &queue, priority: 0.9),
            ]
            let order = startOrder(after: downloads[0].download, in: &queue, by: index(downloads.map(\.download)))
            XCTAssertEqual(order, ["high", "normal", "low"], "\(prioritization)")
        }
    }

    func testNoMoreThanTheMaximumRunAtOnce() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 2)
        let downloads = try (0..<5).map { try add("\($0)", to: &queue) }
        XCTAssertEqual(downloads.map(\.started), [true, true, false, false, false])
        XCTAssertEqual(queue.active.count, 2)

        let first = queue.finish(downloads[0].download.id, for: "0")
        XCTAssertEqual(first.handlers.count, 1)
        XCTAssertEqual(first.start.map { ObjectIdentifier($0) }, [ObjectIdentifier(downloads[2].download.task)], "one slot freed, one started")
        XCTAssertEqual(queue.active.count, 2)
        XCTAssertEqual(queue.waiting, ["3", "4"])

        XCTAssertEqual(ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 0).maximumActiveDownloads, 1)
        XCTAssertEqual(ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: -3).maximumActiveDownloads, 1)
    }

    func testJoiningMergesHandlersIntoOneDownload() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 4)
        let (download, _) = try add("a", to: &queue)
        XCTAssertNil(queue.join("b", handler: try handler()), "nothing to join for another URL")
        let joined = queue.join("a", handler: try handler())
        XCTAssertTrue(joined === download.task)
        XCTAssertEqual(queue.merged["a"]?.handlers.count, 2)
        XCTAssertEqual(queue.finish(download.id, for: "a").handlers.count, 2, "every handler hears the end")
    }

    func testCancellingOneReceiptKeepsTheOthers() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 4)
        let (download, _) = try add("a", to: &queue)
        let second = try handler()
        _ = queue.join("a", handler: second)
        let first = download.handlers[0]

        let cancelled = queue.cancel(first.receiptID, task: download.task)
        XCTAssertEqual(cancelled.handler?.receiptID, first.receiptID)
        XCTAssertNil(cancelled.orphanedTask, "another receipt still wants it")
        XCTAssertEqual(queue.merged["a"]?.handlers.map(\.receiptID), [second.receiptID])

        let last = queue.cancel(second.receiptID, task: download.task)
        XCTAssertEqual(last.handler?.receiptID, second.receiptID)
        XCTAssertTrue(last.orphanedTask === download.task, "the last receipt out cancels the transfer")
        XCTAssertNil(queue.merged["a"])
        XCTAssertFalse(queue.isCurrent(download.id, for: "a"))

        let again = queue.cancel(second.receiptID, task: download.task)
        XCTAssertNil(again.handler, "cancelling twice does nothing")
        XCTAssertNil(again.orphanedTask)
    }

    /// A receipt that lifted a download's priority lets it fall back to what the receipts left
    /// want when it cancels; a priority set on the task by someone else is left alone.
    func testACancelledReceiptUndoesOnlyItsOwnLift() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 1)
        try add("running", to: &queue)
        var prefetch = try handler()
        prefetch.priority = 0.1
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:9/a"))
        let task = manager.dataTask(with: URLRequest(url: url), uploadProgress: nil, downloadProgress: nil) { _ in }
        task.priority = 0.1
        XCTAssertFalse(queue.add(MergedImageDownload(id: queue.makeID(), urlIdentifier: "a", task: task, handlers: [prefetch])))

        let view = try handler()  // the default, 0.5
        _ = queue.join("a", handler: view)
        task.priority = view.priority  // the downloader's lift
        let withdrawn = queue.cancel(view.receiptID, task: task)
        XCTAssertNil(withdrawn.orphanedTask)
        XCTAssertTrue(withdrawn.lowered?.task === task)
        XCTAssertEqual(withdrawn.lowered?.priority, 0.1, "back to the prefetch's")

        let another = try handler()
        _ = queue.join("a", handler: another)
        task.priority = 0.9  // the caller's own, through a receipt's task
        XCTAssertNil(queue.cancel(another.receiptID, task: task).lowered, "a priority set by the caller is kept")
    }

    func testACancelledActiveDownloadKeepsItsSlotUntilItEnds() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 1)
        let (running, _) = try add("a", to: &queue)
        let (waiting, started) = try add("b", to: &queue)
        XCTAssertFalse(started)
        XCTAssertTrue(queue.cancel(running.handlers[0].receiptID, task: running.task).orphanedTask === running.task)
        XCTAssertEqual(queue.active, [running.id], "its transfer has not ended yet")
        XCTAssertEqual(queue.waiting, ["b"])

        let ended = queue.finish(running.id, for: "a")
        XCTAssertEqual(ended.handlers.count, 0, "a cancelled download has no one to tell")
        XCTAssertTrue(ended.start.first === waiting.task)
        XCTAssertEqual(queue.active, [waiting.id])
    }

    func testACancelledWaitingDownloadNeverStarts() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 1)
        let (running, _) = try add("a", to: &queue)
        let (cancelled, _) = try add("b", to: &queue)
        let (kept, _) = try add("c", to: &queue)
        XCTAssertTrue(queue.cancel(cancelled.handlers[0].receiptID, task: cancelled.task).orphanedTask === cancelled.task)
        XCTAssertEqual(queue.waiting, ["c"])
        let ended = queue.finish(running.id, for: "a")
        XCTAssertEqual(ended.start.map { ObjectIdentifier($0) }, [ObjectIdentifier(kept.task)])
    }

    /// A long line (the pipeline benchmark asks for 1,000 images at once): cancelling waiting
    /// and running downloads in it, then finishing the running ones, starts every other one
    /// once, oldest first, and leaves nothing behind.
    func testALongLineDrainsInOrderAroundCancels() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 2)
        let downloads = try (0..<60).map { try add("k\($0)", to: &queue).download }
        let byTask = index(downloads)
        for cancelled in [1, 10, 20, 59] {  // k1 is running, the others wait
            let download = downloads[cancelled]
            XCTAssertTrue(queue.cancel(download.handlers[0].receiptID, task: download.task).orphanedTask === download.task)
        }
        XCTAssertEqual(queue.waiting.count, 55, "the three waiting ones left the line, the running one kept its slot")
        XCTAssertEqual(queue.active.count, 2)

        var started: [String] = []
        var running = [(downloads[0].id, "k0"), (downloads[1].id, "k1")]
        for _ in 0..<downloads.count where !running.isEmpty {  // bounded: each round ends one download
            let (id, key) = running.removeFirst()
            for task in queue.finish(id, for: key).start {
                guard let known = byTask[ObjectIdentifier(task)] else { return XCTFail("an unknown task started") }
                started.append(known.1)
                running.append(known)
            }
        }
        let expected = (2..<59).filter { ![10, 20].contains($0) }.map { "k\($0)" }
        XCTAssertEqual(started, expected)
        XCTAssertTrue(queue.merged.isEmpty && queue.waiting.isEmpty && queue.active.isEmpty, "nothing left behind")
    }

    func testAnOldReceiptNeverTouchesANewerDownloadOfTheSameURL() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 4)
        let (old, _) = try add("a", to: &queue)
        _ = queue.finish(old.id, for: "a")
        let (new, _) = try add("a", to: &queue)

        let stale = queue.cancel(old.handlers[0].receiptID, task: old.task)
        XCTAssertNil(stale.handler)
        XCTAssertNil(stale.orphanedTask)
        XCTAssertTrue(queue.isCurrent(new.id, for: "a"))
        XCTAssertFalse(queue.isCurrent(old.id, for: "a"))
        XCTAssertEqual(queue.finish(old.id, for: "a").handlers.count, 0, "a stale completion is ignored")
        XCTAssertTrue(queue.isCurrent(new.id, for: "a"))
    }

    func testRemoveAllHandsBackEveryDownload() throws {
        var queue = ImageDownloadQueue(prioritization: .fifo, maximumActiveDownloads: 1)
        try add("a", to: &queue)
        try add("b", to: &queue)
        XCTAssertEqual(Set(queue.removeAll().map(\.urlIdentifier)), ["a", "b"])
        XCTAssertTrue(queue.merged.isEmpty && queue.waiting.isEmpty && queue.active.isEmpty)
    }
}
