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
        private var events: [String] = []
        /// What the monitors heard, in order: "send", "redirect", "retry", and each head's status.
        var heard: [String] {
            _ = recorded
            return lock.withLock { events }
        }
        func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) {
            lock.withLock {
                codes.append(head.statusCode)
                events.append("\(head.statusCode)")
            }
        }
        func task(_ task: SessionTask, willSend request: URLRequest) { lock.withLock { events.append("send") } }
        func task(_ task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest: URLRequest) {
            lock.withLock { events.append("redirect") }
        }
        func task(_ task: SessionTask, willRetryAfter delay: TimeInterval, dueTo error: any Error) {
            lock.withLock { events.append("retry") }
        }
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

    /// Only the refused `100-continue` goes: another expectation of the same line stays for
    /// the server to judge (here it answers 417 to it too, which is then the answer).
    func testOtherExpectationsStayWhenTheContinueIsDropped() async throws {
        let server = try server { _, _ in "417 Expectation Failed\r\nContent-Length: 0" }
        defer { server.stop() }
        let heads = Heads()
        let manager = manager(heads)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        var request = try request(to: server)
        request.setValue("100-continue, x-audit=1", forHTTPHeaderField: "Expect")
        let response = await manager.response(for: request)
        XCTAssertEqual(response.response?.statusCode, 417, "\(response.result)")
        let expectations = server.received.withLock { texts in
            texts.map { text in
                text.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("expect:") }.joined(separator: "|")
            }
        }
        XCTAssertEqual(expectations, ["Expect: 100-continue, x-audit=1", "Expect: x-audit=1"])
        XCTAssertEqual(
            TaskDelegate.droppingContinueExpectation(from: ["Accept: */*", "expect: 100-Continue", "Expect: a=\"1,2\""]),
            ["Accept: */*", "Expect:"], "a quoted value goes whole; none left: curl's own is kept out")
        XCTAssertEqual(
            TaskDelegate.droppingContinueExpectation(from: ["Expect: 100-continue;ack=1, x"]), ["Expect: x"],
            "libcurl would wait for a 100 again")
    }

    /// A server for the feature pairs below: each request on a connection of its own, read
    /// whole when it carries no expectation; `answer` gets the request's path and whether it
    /// expects a 100, and gives the response's status line and fields (a 200's body is "ok";
    /// a 417 is sent without reading the body).
    private func server(_ answer: @escaping @Sendable (_ path: String, _ expects: Bool) -> String) throws -> ScriptedServer {
        try ScriptedServer(connections: 8) { socket, server in
            guard let head = server.readHead(socket) else { return }
            let path = head.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            let expects = head.lowercased().contains("expect: 100-continue")
            if !expects { guard server.readBody(socket, after: head) != nil else { return } }
            let status = answer(path, expects)
            server.write(socket, "HTTP/1.1 \(status)\r\nConnection: close\r\n\r\n" + (status.hasPrefix("200") ? "ok" : ""))
        }
    }

    /// 417 × redirect: the expectation is dropped on the hop the 417 answered, and the hops
    /// after it go without it too (the server refuses expectations).
    func testARefusedExpectationAfterARedirectIsSentAgainWithoutIt() async throws {
        let server = try server { path, expects in
            switch (path, expects) {
            case ("/put", _): return "307 Temporary Redirect\r\nLocation: /moved\r\nContent-Length: 0"
            case ("/moved", true): return "417 Expectation Failed\r\nContent-Length: 0"
            case ("/moved", false): return "307 Temporary Redirect\r\nLocation: /final\r\nContent-Length: 0"
            default: return expects ? "417 Expectation Failed\r\nContent-Length: 0" : "200 OK\r\nContent-Length: 2"
            }
        }
        defer { server.stop() }
        let heads = Heads()
        let manager = manager(heads)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let response = await manager.response(for: try request(to: server))
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(response.data, Data("ok".utf8))
        let sent = server.received.withLock { texts in
            texts.filter { $0.hasPrefix("PUT ") }.map { text in
                let path = text.split(separator: " ")[1]
                return "\(path) " + (text.lowercased().contains("expect: 100-continue") ? "expect" : "plain")
            }
        }
        XCTAssertEqual(sent, ["/put expect", "/moved expect", "/moved plain", "/final plain"])
        XCTAssertEqual(heads.heard, ["send", "redirect", "send", "send", "redirect", "send", "200"])
    }

    /// 417 × the retrier: the resend without the expectation is no retry (the retrier is not
    /// asked, nothing is counted against its limit); a 503 to it is, and the retry goes
    /// without the expectation as well.
    func testTheRetriersAttemptAfterARefusedExpectationGoesWithoutIt() async throws {
        let plain = Mutex(0)
        let server = try server { _, expects in
            if expects { return "417 Expectation Failed\r\nContent-Length: 0" }
            let count = plain.withLock { $0 += 1; return $0 }
            return count == 1 ? "503 Service Unavailable\r\nContent-Length: 0" : "200 OK\r\nContent-Length: 2"
        }
        defer { server.stop() }
        let heads = Heads()
        let manager = manager(heads)
        manager.requestRetrier = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.01, jitter: 0)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let response = await manager.response(for: try request(to: server))
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(response.data, Data("ok".utf8))
        XCTAssertEqual(requests(server), ["expect", "plain", "plain"])
        XCTAssertEqual(heads.heard, ["send", "send", "503", "retry", "send", "200"])
    }
}
