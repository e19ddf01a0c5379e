import CurlewTestSupport
import Foundation
import Glibc
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A caller's own `Expect: 100-continue` meets a server that refuses expectations (417).
/// libcurl answers such a 417 by sending the request again, but with the caller's header
/// list, expectation included: the server got the same request hundreds of times a minute,
/// each 417 reaching the monitors, until the idle timeout ended the task. RFC 9110 §10.1.1:
/// the client repeats the request without the expectation.
final class ExpectationFailedTests: XCTestCase {
    /// The status codes of the heads the monitors heard.
    final class Heads: EventMonitor, @unchecked Sendable {  // `lock` guards `codes` and `ended`
        private let lock = NSLock()
        private var codes: [Int] = []
        private var ended = false
        let queue = DispatchQueue(label: "ExpectationFailedTests.heads")
        /// The heads heard, once the task's completion was (monitors hear events in batches,
        /// a moment after the completion handler; bounded wait, not a timed assertion).
        var recorded: [Int] {
            for _ in 0..<2000 where !lock.withLock({ ended }) { usleep(10_000) }
            return lock.withLock { codes }
        }
        func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) { lock.withLock { codes.append(head.statusCode) } }
        func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) { lock.withLock { ended = true } }
    }

    /// A server answering 417 to every request with an expectation (and, when `always`, to
    /// the others too, after reading their body); 200 `ok` otherwise. With `afterBody`, it
    /// reads the body first (libcurl sends it when its wait for a 100 ends). At most 8 requests.
    private func server(always: Bool = false, afterBody: Bool = false) throws -> ScriptedServer {
        try ScriptedServer(connections: 8) { socket, server in
            for _ in 0..<8 {
                guard let head = server.readHead(socket) else { return }
                if afterBody {
                    guard server.readBody(socket, after: head) != nil else { return }
                    server.write(socket, "HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                }
                if head.lowercased().contains("expect: 100-continue") {
                    guard server.write(socket, "HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n") else { return }
                    continue
                }
                guard server.readBody(socket, after: head) != nil else { return }
                let answer = always ? "417 Expectation Failed\r\nContent-Length: 0" : "200 OK\r\nContent-Length: 2"
                server.write(socket, "HTTP/1.1 \(answer)\r\nConnection: close\r\n\r\n" + (always ? "" : "ok"))
                return
            }
        }
    }

    private func request(to server: ScriptedServer, stream: Bool = false) throws -> URLRequest {
        var request = URLRequest(url: try XCTUnwrap(URL(string: server.baseURLString + "/put")))
        request.httpMethod = "PUT"
        request.setValue("100-continue", forHTTPHeaderField: "Expect")
        let body = Data(repeating: 7, count: 4096)
        if stream {
            request.httpBodyStream = InputStream(data: body)
            request.setValue("\(body.count)", forHTTPHeaderField: "Content-Length")
        } else {
            request.httpBody = body
        }
        return request
    }

    private func manager(_ heads: Heads, additionalHeaders: [String: String] = [:]) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.httpAdditionalHeaders = additionalHeaders
        configuration.proxy = .none
        configuration.timeoutIntervalForRequest = 20
        return URLSessionManager(configuration: configuration, eventMonitors: [heads])
    }

    /// The requests the server read, each as "expect" or "plain".
    private func requests(_ server: ScriptedServer) -> [String] {
        server.received.withLock { texts in
            texts.filter { $0.hasPrefix("PUT ") }.map { $0.lowercased().contains("expect: 100-continue") ? "expect" : "plain" }
        }
    }

    /// One PUT with `Expect: 100-continue` (in the request, or in the configuration's
    /// `httpAdditionalHeaders`) to a `server(always:afterBody:)`: its response, the requests
    /// the server read ("expect" or "plain"), and the heads the monitors heard.
    private func put(
        always: Bool = false, afterBody: Bool = false, stream: Bool = false, expectationFromConfiguration: Bool = false
    ) async throws -> (response: DataResponse, requests: [String], heads: [Int]) {
        let server = try server(always: always, afterBody: afterBody)
        defer { server.stop() }
        let heads = Heads()
        let manager = manager(heads, additionalHeaders: expectationFromConfiguration ? ["Expect": "100-continue"] : [:])
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        var request = try request(to: server, stream: stream)
        if expectationFromConfiguration { request.setValue(nil, forHTTPHeaderField: "Expect") }
        let response = await manager.response(for: request)
        return (response, requests(server), heads.recorded)
    }

    func testARefusedExpectationIsSentAgainWithoutIt() async throws {
        let (response, requests, heads) = try await put()
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(response.data, Data("ok".utf8))
        XCTAssertEqual(requests, ["expect", "plain"])
        XCTAssertEqual(heads, [200], "the refused expectation's 417 is not the task's")
    }

    /// The expectation set for every request (`httpAdditionalHeaders`) is dropped the same way.
    func testARefusedExpectationOfTheConfigurationIsSentAgainWithoutIt() async throws {
        let (response, requests, heads) = try await put(expectationFromConfiguration: true)
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(requests, ["expect", "plain"])
        XCTAssertEqual(heads, [200])
    }

    func testAServerThatAnswers417ToEverythingIsAskedTwice() async throws {
        let (response, requests, heads) = try await put(always: true)
        XCTAssertEqual(response.response?.statusCode, 417, "\(response.result)")
        XCTAssertEqual(requests, ["expect", "plain"])
        XCTAssertEqual(heads, [417])
    }

    /// A body read from a stream cannot go again once sent (the server read it, then refused
    /// the expectation): the 417 is the answer, and nothing more is sent. (libcurl sends
    /// nothing more here either, its upload being done, and Curlew leaves such a body to it:
    /// this one guards that the 417 stays the answer, with no second request.)
    func testABodyThatCannotGoAgainCompletesWithThe417() async throws {
        let (response, requests, heads) = try await put(afterBody: true, stream: true)
        XCTAssertEqual(response.response?.statusCode, 417, "\(response.result)")
        XCTAssertEqual(requests, ["expect"])
        XCTAssertEqual(heads, [417])
    }
}
