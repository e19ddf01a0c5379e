import Foundation
import Glibc
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Completion handlers on a queue the caller set: the driver batches completions of one pass
/// into one block only for the manager's own serial queue and the main queue. On a caller's
/// concurrent queue, handlers finished in the same pass must still run side by side.
final class CompletionQueueTests: XCTestCase {
    /// Two responses written back to back (so they usually finish in one pass of the driver);
    /// each handler waits for the other to have started. Run one after the other in one block,
    /// the first would wait in vain.
    func testHandlersOnACallersConcurrentQueueRunSideBySide() async throws {
        let listener = try LoopbackListener()
        let server = Thread {
            let fd = listener.descriptorForServing
            var clients: [Int32] = []
            while clients.count < 2 {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                var request: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 4096)
                while !request.ends(with: Array("\r\n\r\n".utf8)) {
                    let read = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                    guard read > 0 else { break }
                    request += chunk[..<read]
                }
                clients.append(client)
            }
            let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".utf8)
            for client in clients { _ = sendAll(client, response) }
            for client in clients { close(client) }
        }
        server.start()
        defer { listener.close() }

        let manager = URLSessionManager.raw()
        manager.completionQueue = DispatchQueue(label: "CompletionQueueTests.concurrent", attributes: .concurrent)
        let started = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
        let sawOther = Mutex([false, false])
        let done = expectation(description: "both handlers")
        done.expectedFulfillmentCount = 2
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:\(listener.port)/"))
        for index in 0..<2 {
            manager.dataTask(with: URLRequest(url: url)) { response in
                XCTAssertNil(response.error)
                started[index].signal()
                let other = started[1 - index].wait(timeout: .now() + 20) == .success
                if other { started[1 - index].signal() }  // leave it for the other's own check
                sawOther.withLock { $0[index] = other }
                done.fulfill()
            }.resume()
        }
        await fulfillment(of: [done], timeout: 60)
        XCTAssertEqual(sawOther.withLock { $0 }, [true, true])
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
