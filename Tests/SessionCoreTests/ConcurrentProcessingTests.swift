import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A serializer that prefers concurrent processing runs off the completion queue, several at
/// once; the handlers still run on the completion queue.
final class ConcurrentProcessingTests: XCTestCase {
    /// Waits until `parties` calls are inside `responseObject` at the same time (bounded).
    struct MeetingSerializer: EngineResponseSerialization {
        let parties: Int
        let inside = Arrivals()
        var prefersConcurrentProcessing: Bool { true }

        final class Arrivals: Sendable {
            let count = Mutex(0)
            let met = Mutex(false)
        }

        func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> String {
            // Counts those inside now: serial runs (one leaves before the next enters) never meet.
            inside.count.withLock { $0 += 1 }
            defer { inside.count.withLock { $0 -= 1 } }
            for _ in 0..<1000 {
                if inside.met.withLock({ $0 }) { break }
                if inside.count.withLock({ $0 }) >= parties {
                    inside.met.withLock { $0 = true }
                    break
                }
                Thread.sleep(forTimeInterval: 0.01)
            }
            return "ok"
        }
    }

    typealias Arrivals = MeetingSerializer.Arrivals

    func testHeavySerializersRunInParallelAndHandlersOnTheCompletionQueue() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/a", response: .text("a"))
        let manager = URLSessionManager()
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let serializer = MeetingSerializer(parties: 3)
        manager.responseSerializer = serializer
        let queue = DispatchQueue(label: "test.completion")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        manager.completionQueue = queue
        let onQueue = Arrivals()
        let done = expectation(description: "three completions")
        done.expectedFulfillmentCount = 3
        for _ in 0..<3 {
            manager.dataTask(with: URLRequest(url: try server.url("/a"))) { response in
                XCTAssertEqual(response.value as? String, "ok")
                if DispatchQueue.getSpecific(key: key) == true { onQueue.count.withLock { $0 += 1 } }
                done.fulfill()
            }.resume()
        }
        await fulfillment(of: [done], timeout: 60)
        XCTAssertTrue(serializer.inside.met.withLock { $0 }, "the three serializers ran at the same time")
        XCTAssertEqual(onQueue.count.withLock { $0 }, 3, "every handler on the completion queue")
    }
}
