import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The engine under load, at rest and at teardown.
final class EngineTests: XCTestCase {
    func testFiveHundredConcurrentGETsAllCompleteWithCorrectBodies() async throws {
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 32
        let manager = URLSessionManager.raw(configuration)
        let total = 500
        let results = Mutex<[Int: Int]>([:])
        let done = expectation(description: "all complete")
        done.expectedFulfillmentCount = total
        for index in 0..<total {
            let size = 1 + index % 97
            let request = URLRequest(url: try Peer.url("/bytes/\(size)?seed=\(index)"))
            manager.dataTask(with: request) { response in
                let ok = response.error == nil && response.response?.statusCode == 200 && response.data?.count == size
                results.withLock { $0[index] = ok ? size : -1 }
                done.fulfill()
            }.resume()
        }
        await fulfillment(of: [done], timeout: 120)
        let snapshot = results.withLock { $0 }
        XCTAssertEqual(snapshot.count, total)
        XCTAssertEqual(snapshot.values.filter { $0 < 0 }.count, 0, "failed transfers")
        XCTAssertTrue(manager.tasks.isEmpty)
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testIdleManagerUsesNoCPU() async throws {
        let manager = URLSessionManager.raw()
        _ = try await manager.data(for: URLRequest(url: try Peer.url("/get")))  // warm: a kept-alive connection exists
        let tid = try XCTUnwrap(manager.engine.driver?.threadID.withLock { $0 })
        try await Task.sleep(nanoseconds: 100_000_000)
        let before = try XCTUnwrap(cpuTicks(ofThread: tid))
        let processBefore = processCPUMicroseconds()
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let after = try XCTUnwrap(cpuTicks(ofThread: tid))
        let processAfter = processCPUMicroseconds()
        // A busy-polling driver would burn ~200 ticks in 2 s; a blocked one burns 0.
        XCTAssertLessThanOrEqual(after - before, 1, "driver thread used CPU while idle")
        print("idle: driver thread \(after - before) ticks, process \(processAfter - processBefore) µs over 2 s")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testInvalidatingWithHundredInFlightTasksCancelsAllAndLeaksNothing() async throws {
        // The in-process server, not httpbin: a hundred parallel /delay requests would hold
        // every httpbin worker thread for the tests that follow.
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/hold") { _ in .fault(.acceptAndNeverRespond) }
        let descriptorsBefore = openFileDescriptorCount()
        weak var weakTask: SessionTask?
        weak var weakManager: URLSessionManager?
        var driverTID: Int32?
        do {
            var configuration = SessionConfiguration.default
            configuration.httpMaximumConnectionsPerHost = 100
            let manager = URLSessionManager.raw(configuration)
            weakManager = manager
            let errors = Mutex<[SessionError?]>([])
            let done = expectation(description: "all complete")
            done.expectedFulfillmentCount = 100
            let invalidated = expectation(forNotification: .sessionDidInvalidate, object: manager)
            for _ in 0..<100 {
                let task = manager.dataTask(with: URLRequest(url: try server.url("/hold"))) { response in
                    errors.withLock { $0.append(response.error as? SessionError) }
                    done.fulfill()
                }
                task.resume()
                weakTask = task
            }
            try await Task.sleep(nanoseconds: 300_000_000)
            XCTAssertEqual(manager.tasks.count, 100)
            driverTID = manager.engine.driver?.threadID.withLock { $0 }
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            await fulfillment(of: [done, invalidated], timeout: 30)
            XCTAssertEqual(errors.withLock { $0 }, Array(repeating: .cancelled, count: 100))
            XCTAssertTrue(manager.tasks.isEmpty)
        }
        // Give the completion queue a moment to drop its references (bounded: 30 s).
        for _ in 0..<1500 where weakTask != nil || weakManager != nil { try await Task.sleep(nanoseconds: 20_000_000) }
        XCTAssertNil(weakTask, "a task outlived invalidation")
        XCTAssertNil(weakManager, "the manager outlived invalidation")
        if let driverTID {
            var exited = false
            for _ in 0..<1500 {
                if !FileManager.default.fileExists(atPath: "/proc/self/task/\(driverTID)") { exited = true; break }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            XCTAssertTrue(exited, "the driver thread did not exit")
        }
        XCTAssertTrue(server.waitForAllConnectionsClosed(timeout: .seconds(20)), "client connections left open")
        XCTAssertEqual(openFileDescriptorCount(), descriptorsBefore, "file descriptors leaked")
    }

    func testReleasingAManagerCancelsItsTasks() async throws {
        let request = URLRequest(url: try Peer.url("/delay/10"))
        let completed = expectation(description: "completed")
        let error = Mutex<SessionError?>(nil)
        do {
            let manager = URLSessionManager.raw()
            manager.dataTask(with: request) { response in
                error.withLock { $0 = response.error as? SessionError }
                completed.fulfill()
            }.resume()
        }
        await fulfillment(of: [completed], timeout: 30)
        XCTAssertEqual(error.withLock { $0 }, .cancelled)
    }

    func testStreamedBodyIsDeliveredInChunksAndNotCollected() async throws {
        let manager = URLSessionManager.raw()
        let received = Mutex(0)
        let hookBytes = Mutex(0)
        manager.setDataTaskDidReceiveDataBlock { _, data in hookBytes.withLock { $0 += data.count } }
        let url = try Peer.url("/stream-bytes/100000?chunk_size=1000")
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.dataTask(
                with: URLRequest(url: url),
                dataHandler: { data in received.withLock { $0 += data.count } },
                completionHandler: { continuation.resume(returning: $0) }
            ).resume()
        }
        XCTAssertNil(response.error)
        XCTAssertNil(response.data)
        XCTAssertEqual(received.withLock { $0 }, 100_000)
        XCTAssertEqual(hookBytes.withLock { $0 }, 100_000)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testRedirectsAreFollowedAndCounted() async throws {
        let manager = URLSessionManager.raw()
        let response = await manager.response(for: URLRequest(url: try Peer.url("/redirect/3")))
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(response.metrics?.redirectCount, 3)
        XCTAssertEqual(response.metrics?.transactionMetrics.count, 4)
        XCTAssertEqual(response.request?.url?.path, "/get")
        var limited = SessionConfiguration.default
        limited.maximumRedirects = 2
        let strict = URLSessionManager(configuration: limited)
        let refused = await strict.response(for: URLRequest(url: try Peer.url("/redirect/3")))
        XCTAssertEqual(refused.error as? SessionError, .tooManyRedirects(2))
    }

    func testSuspendWhileARedirectDecisionIsPendingHoldsTheTaskUntilResumed() async throws {
        let manager = URLSessionManager.raw()
        manager.setTaskWillPerformHTTPRedirectionBlock { task, _, proposed in
            task.suspend()  // arrives while the transfer is detached, waiting for this answer
            return proposed
        }
        let completed = Mutex(false)
        let task = manager.dataTask(with: URLRequest(url: try Peer.url("/redirect/1"))) { _ in
            completed.withLock { $0 = true }
        }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        for _ in 0..<3000 where task.state != .suspended { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(task.state, .suspended)
        try await Task.sleep(nanoseconds: 500_000_000)
        XCTAssertFalse(completed.withLock { $0 }, "a suspended task completed")
        task.resume()
        await fulfillment(of: [done], timeout: 10)
        XCTAssertNil(task.error)
        XCTAssertEqual(task.response?.statusCode, 200)
        XCTAssertEqual(task.currentRequest?.url?.path, "/get")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
