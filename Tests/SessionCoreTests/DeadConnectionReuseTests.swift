import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A kept-alive connection the server closes just as the next request reuses it (its idle
/// timeout racing the client): the server reads that request and hangs up without a byte of
/// answer. libcurl sends such a request again on a new connection, which takes the request
/// body from its start again. Where the connection cache meets the request bodies: the cache
/// keeps more idle connections for longer (`ConnectionCacheLimit`), so more requests meet one.
final class DeadConnectionReuseTests: XCTestCase {
    /// The first connection answers `/warm`, then reads the next request whole and closes
    /// without answering; every later connection answers each request with the number of
    /// body bytes it read.
    private func makeServer() throws -> ScriptedServer {
        try ScriptedServer(connections: 8) { socket, server in
            let isFirst = server.acceptedCount == 1
            while let head = server.readHead(socket) {
                guard let length = server.readBody(socket, after: head) else { return }
                if isFirst && !head.hasPrefix("GET /warm ") { return }  // read, then hang up
                let answer = "\(length)"
                guard server.write(socket, "HTTP/1.1 200 OK\r\nContent-Length: \(answer.utf8.count)\r\n\r\n\(answer)") else { return }
            }
        }
    }

    /// Warms a connection with `/warm`, then sends `request` on it.
    private func sendOnAWarmConnection(_ request: (URL) -> URLRequest) async throws -> (DataResponse, ScriptedServer) {
        let server = try makeServer()
        let manager = URLSessionManager.raw()
        let warm = await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: "\(server.baseURLString)/warm"))))
        XCTAssertNil(warm.error)
        let response = await manager.response(for: request(try XCTUnwrap(URL(string: "\(server.baseURLString)/next"))))
        try await eventually({ manager.tasks.isEmpty }, "tasks left in the manager: \(manager.tasks.count)")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        server.stop()
        return (response, server)
    }

    func testAGetIsSentAgainOnANewConnection() async throws {
        let (response, server) = try await sendOnAWarmConnection { URLRequest(url: $0) }
        XCTAssertNil(response.error, "\(String(describing: response.error))")
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(server.acceptedCount, 2)
    }

    /// A body in memory is sent again from its start: the second connection reads all of it.
    func testABodyInMemoryIsSentAgainWhole() async throws {
        let body = Data((0..<1500).map { UInt8(truncatingIfNeeded: $0) })
        let (response, server) = try await sendOnAWarmConnection { url in
            var request = URLRequest(url: url)
            request.httpMethod = "POST"
            request.httpBody = body
            return request
        }
        XCTAssertNil(response.error, "\(String(describing: response.error))")
        XCTAssertEqual(response.data.map { String(decoding: $0, as: UTF8.self) }, "1500", "the bytes the new connection read")
        XCTAssertEqual(server.acceptedCount, 2)
    }

    /// A caller's `InputStream` can be read once: the request cannot be sent again, and the
    /// task ends once, with the lost connection as its error (not a hang, not a success).
    func testAOneShotStreamBodyEndsWithTheLostConnection() async throws {
        let (response, server) = try await sendOnAWarmConnection { url in
            var request = URLRequest(url: url)
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(data: Data(repeating: 0x61, count: 1500))
            request.setValue("1500", forHTTPHeaderField: "Content-Length")
            return request
        }
        guard case .networkLost(let detail)? = response.error as? SessionError else {
            return XCTFail("expected networkLost, got \(String(describing: response.error))")
        }
        XCTAssertTrue(detail.contains("cannot be sent again"), detail)
        // libcurl connects again before it asks for the body's start; the request itself reached
        // the first connection only.
        let requests = server.received.withLock { $0 }.filter { $0.hasPrefix("POST /next ") }
        XCTAssertEqual(requests.count, 1, "the request went out again: \(requests)")
    }
}
