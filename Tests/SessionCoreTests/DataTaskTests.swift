import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

final class DataTaskTests: XCTestCase {
    var manager: URLSessionManager!

    override func setUp() {
        manager = URLSessionManager.raw()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    func testGETWithQueryAndHeadersIsEchoed() async throws {
        var request = URLRequest(url: try Peer.url("/get?name=curlew&emoji=%F0%9F%90%A6"))
        request.setValue("yes", forHTTPHeaderField: "X-Curlew-Test")
        let (data, response) = try await manager.data(for: request)
        XCTAssertEqual(response.statusCode, 200)
        let body = try json(data)
        let args = try XCTUnwrap(body["args"] as? [String: String])
        XCTAssertEqual(args["name"], "curlew")
        XCTAssertEqual(args["emoji"], "🐦")
        let headers = try XCTUnwrap(body["headers"] as? [String: String])
        XCTAssertEqual(headers["X-Curlew-Test"], "yes")
        XCTAssertNil(headers["Expect"])
    }

    func testPOSTOfFiveMegabytesArrivesIntact() async throws {
        var bytes = [UInt8](repeating: 0, count: 5 * 1024 * 1024)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 8) }
        let payload = Data(bytes)
        var request = URLRequest(url: try Peer.url("/anything"))
        request.httpMethod = "POST"
        request.httpBody = payload
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        let (data, response) = try await manager.data(for: request)
        XCTAssertEqual(response.statusCode, 200)
        let body = try json(data)
        let echoed = try XCTUnwrap(body["data"] as? String)
        // httpbin echoes binary bodies as a base64 data URL.
        let base64 = try XCTUnwrap(echoed.split(separator: ",", maxSplits: 1).last)
        XCTAssertEqual(Data(base64Encoded: String(base64)), payload)
        let headers = try XCTUnwrap(body["headers"] as? [String: String])
        XCTAssertNil(headers["Expect"], "no 100-continue wait for a body over 1 MiB")
    }

    func testClientAndServerErrorsAreResponsesNotErrors() async throws {
        for status in [404, 418, 500, 503] {
            let (_, response) = try await manager.data(for: URLRequest(url: try Peer.url("/status/\(status)")))
            XCTAssertEqual(response.statusCode, status)
        }
    }

    func testCompletionHandlerRunsOnCompletionQueueWithCompletedState() async throws {
        let queue = DispatchQueue(label: "test.completion")
        manager.completionQueue = queue
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let request = URLRequest(url: try Peer.url("/bytes/1024"))
        let (state, onQueue, count): (SessionTask.State?, Bool, Int) = await withCheckedContinuation { continuation in
            let box = TaskBox()
            let task = manager.dataTask(with: request) { response in
                continuation.resume(returning: (box.task?.state, DispatchQueue.getSpecific(key: key) == 7, response.data?.count ?? -1))
            }
            box.task = task
            XCTAssertEqual(task.state, .suspended)
            task.resume()
            XCTAssertEqual(task.state, .running)
        }
        XCTAssertEqual(state, .completed)
        XCTAssertTrue(onQueue)
        XCTAssertEqual(count, 1024)
    }

    func testGzipDeflateAndBrotliAreDecodedTransparently() async throws {
        for path in ["/gzip", "/deflate", "/brotli"] {
            let (data, response) = try await manager.data(for: URLRequest(url: try Peer.url(path)))
            XCTAssertEqual(response.statusCode, 200, path)
            let body = try json(data)
            XCTAssertNotNil(body["gzipped"] ?? body["deflated"] ?? body["brotli"], path)
        }
    }

    func testKeepAliveReusesTheConnection() async throws {
        let request = URLRequest(url: try Peer.url("/get"))
        _ = try await manager.data(for: request)
        let second = await manager.response(for: request)
        XCTAssertEqual(second.metrics?.isReusedConnection, true)
        XCTAssertEqual(second.metrics?.httpVersion, "HTTP/1.1")
        // Phases that did not happen on a reused connection are 0 (TaskMetrics' contract).
        XCTAssertEqual(second.metrics?.domainLookupDuration, 0)
        XCTAssertEqual(second.metrics?.connectDuration, 0)
        XCTAssertEqual(second.metrics?.secureConnectionDuration, 0)
        let transaction = try XCTUnwrap(second.metrics?.finalTransaction)
        XCTAssertEqual(transaction.statusCode, 200)
        XCTAssertGreaterThan(transaction.requestBytesSent, 0)
        XCTAssertGreaterThan(transaction.responseBodyBytesReceived, 0)
        XCTAssertGreaterThan(transaction.responseHeaderBytesReceived, 0)
        XCTAssertNotNil(transaction.remoteAddress)
        XCTAssertNotNil(transaction.localPort)
    }
}

/// Lets a completion handler see its own task.
final class TaskBox: @unchecked Sendable {
    // @unchecked: written once before resume(), read in the completion handler after it.
    var task: SessionTask?
}
