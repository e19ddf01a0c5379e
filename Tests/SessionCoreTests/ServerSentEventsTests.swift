import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `events(for:)` against an event-stream server of the test's own: partial lines, dropped
/// connections, `Last-Event-ID` on reconnection, and the answers that end the stream.
final class ServerSentEventsTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!

    override func setUp() async throws {
        manager = URLSessionManager.raw()
        server = try TestServer()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
        server = nil
    }

    private static func eventStream(_ pieces: [String], ending: TestResponse.Ending, delay: Duration = .zero) -> TestResponse {
        var response = TestResponse(status: 200, headers: [("Content-Type", "text/event-stream; charset=utf-8")])
        response.body = .stream(pieces.map { TestResponse.Chunk(Data($0.utf8), delay: delay) })
        response.framing = .chunked
        response.ending = ending
        return response
    }

    /// A route's connections, in order, with the `Last-Event-ID` each one sent.
    private final class Connections: Sendable {
        private let sent = Mutex<[String?]>([])
        /// The `Last-Event-ID` of each connection so far.
        var lastEventIDs: [String?] { sent.withLock { $0 } }
        var count: Int { sent.withLock { $0.count } }
        /// Notes `request`; its number, from 1.
        func record(_ request: TestRequest) -> Int {
            sent.withLock { list in
                list.append(request.header("Last-Event-ID"))
                return list.count
            }
        }
    }

    func testEventsAcrossADroppedConnectionResumeFromTheLastEventID() async throws {
        let connections = Connections()
        server.route("/stream") { request in
            let attempt = connections.record(request)
            switch attempt {
            case 1:
                // Partial lines across writes, a retry of 10 ms, then a cut in the middle of
                // an event (its half must be discarded).
                return Self.eventStream(
                    ["retry: 10\nid: 1\nda", "ta: first\n", "\nid: 2\ndata: sec", "ond\n\n", "data: half"],
                    ending: .close)
            case 2:
                return Self.eventStream(["id: 3\nevent: update\ndata: third\ndata: line two\n\n"], ending: .close)
            default:
                return TestResponse(status: 204)
            }
        }
        var received: [ServerSentEvent] = []
        for try await event in manager.events(for: URLRequest(url: try server.url("/stream"))) {
            received.append(event)
        }
        XCTAssertEqual(received, [
            ServerSentEvent(id: "1", data: "first", retry: 10),
            ServerSentEvent(id: "2", data: "second"),
            ServerSentEvent(id: "3", event: "update", data: "third\nline two"),
        ])
        XCTAssertEqual(connections.lastEventIDs, [nil, "2", "3"], "each reconnection sends the last event ID")
        let accept = server.requests.map { $0.header("Accept") }
        XCTAssertEqual(accept, Array(repeating: "text/event-stream", count: 3))
    }

    /// Token refresh meets reconnection: the server revokes the token while the stream is
    /// down, so the reconnection is refused with a 401. The `AuthenticationInterceptor`
    /// refreshes the token and the reconnection goes again with it (the refusal was held back
    /// for the retrier, not taken as a status that ends the stream), resuming from the last
    /// event ID; one refresh in all.
    func testAReconnectionRefusedForAnExpiredTokenIsRefreshedAndResumes() async throws {
        let tokens = try TokenServer()
        defer { tokens.server.shutdown() }
        let seen = Mutex<[String]>([])  // each connection's Authorization and Last-Event-ID
        tokens.server.route("/stream") { request in
            let authorization = request.header("Authorization") ?? "-"
            let attempt = seen.withLock { list -> Int in
                list.append("\(authorization) \(request.header("Last-Event-ID") ?? "-")")
                return list.count
            }
            let current = tokens.state.withLock { $0.current }
            guard authorization == "Bearer \(current)" else { return TestResponse(status: 401, body: Data("expired".utf8)) }
            switch attempt {
            case 1:
                tokens.revoke()  // while the stream is down, the token stops being valid
                return Self.eventStream(["retry: 10\nid: 1\ndata: first\n\n"], ending: .close)
            case 3: return Self.eventStream(["id: 2\ndata: second\n\n"], ending: .close)
            default: return TestResponse(status: 204)
            }
        }
        let refresher = URLSessionManager.raw()
        manager.interceptor = AuthenticationInterceptor(
            authenticator: TokenAuthenticator(tokenURL: try tokens.server.url("/token"), refresher: refresher),
            credential: TestToken(token: "t0", requiresRefresh: false))
        var received: [ServerSentEvent] = []
        for try await event in manager.events(for: URLRequest(url: try tokens.server.url("/stream"))) {
            received.append(event)
        }
        XCTAssertEqual(received, [ServerSentEvent(id: "1", data: "first", retry: 10), ServerSentEvent(id: "2", data: "second")])
        XCTAssertEqual(seen.withLock { $0 }, ["Bearer t0 -", "Bearer t0 1", "Bearer t1 1", "Bearer t1 2"])
        XCTAssertEqual(tokens.tokenRequests, 1)
        refresher.invalidateSessionCancelingTasks(true, resetSession: false)
        await refresher.waitUntilInvalidated()
    }

    /// The idle timeout meets a quiet stream: a server silent for longer than the request's
    /// `timeoutInterval` (no event, no comment) has its connection dropped as a network loss,
    /// and the sequence reconnects after the retry delay with `Last-Event-ID`, losing nothing
    /// a server that honours the ID replays.
    func testAStreamQuietLongerThanTheTimeoutIsReconnectedFromTheLastEventID() async throws {
        let connections = Connections()
        server.route("/quiet") { request in
            let attempt = connections.record(request)
            switch attempt {
            case 1:
                var response = Self.eventStream(["retry: 10\nid: 7\ndata: before the silence\n\n"], ending: .complete)
                // Then nothing for 30 s (the client gives up after 1 s).
                response.body = .stream([
                    TestResponse.Chunk(Data("retry: 10\nid: 7\ndata: before the silence\n\n".utf8)),
                    TestResponse.Chunk(Data("data: too late\n\n".utf8), delay: .seconds(30)),
                ])
                return response
            case 2:
                return Self.eventStream(["id: 8\ndata: after the silence\n\n"], ending: .close)
            default:
                return TestResponse(status: 204)
            }
        }
        var request = URLRequest(url: try server.url("/quiet"))
        request.timeoutInterval = 1
        var received: [ServerSentEvent] = []
        for try await event in manager.events(for: request) { received.append(event) }
        XCTAssertEqual(received, [
            ServerSentEvent(id: "7", data: "before the silence", retry: 10),
            ServerSentEvent(id: "8", data: "after the silence"),
        ])
        XCTAssertEqual(connections.lastEventIDs, [nil, "7", "8"])
    }

    func testAConnectionThatFailsIsRetried() async throws {
        let attempts = Connections()
        server.route("/flaky") { request in
            let attempt = attempts.record(request)
            if attempt == 1 { return .fault(.resetImmediately) }
            if attempt == 2 { return Self.eventStream(["retry: 5\ndata: after the reset\n\n"], ending: .close) }
            return TestResponse(status: 204)
        }
        var events = manager.events(for: URLRequest(url: try server.url("/flaky")))
        events.defaultRetryInterval = 5
        var received: [String] = []
        for try await event in events { received.append(event.data) }
        XCTAssertEqual(received, ["after the reset"])
    }

    /// A server restarting cuts the TLS handshakes of the connections it had accepted: the
    /// stream reconnects, as after any lost connection. It ended for good with
    /// `tlsHandshakeFailed`, which reconnecting cannot cure when TLS itself refuses.
    func testAStreamReconnectsAfterItsTLSHandshakeWasCut() async throws {
        for fault in [TestServerFault.resetImmediately, .closeImmediately] {
            let attempts = Connections()
            let tlsServer = try TLSFixture.server(try TLSFixture.certificates().leaf) { request in
                if attempts.record(request) == 1 { return Self.eventStream(["retry: 5\ndata: over TLS\n\n"], ending: .close) }
                return TestResponse(status: 204)
            }
            defer { tlsServer.shutdown() }
            tlsServer.setFault(fault, forNextConnections: 1)
            let secure = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
            defer { secure.invalidateSessionCancelingTasks(true, resetSession: false) }
            var events = secure.events(for: URLRequest(url: try tlsServer.url("/stream")))
            events.defaultRetryInterval = 5
            var received: [String] = []
            for try await event in events { received.append(event.data) }
            XCTAssertEqual(received, ["over TLS"], "\(fault)")
            XCTAssertEqual(tlsServer.acceptedConnectionCount, 3, "\(fault): the cut handshake, the stream, the 204")
        }
    }

    /// The wait before a reconnection doubles with failures in a row, up to 64 times and a
    /// day, and saturates: a hostile `retry:` of 2^62 ms or more after a failure waited 0 ms
    /// (the doubled product wrapped to a negative number), reconnecting in a loop.
    func testTheReconnectionDelaySaturatesAtADay() {
        typealias Iterator = ServerSentEvents.Iterator
        let day = 86_400_000
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 3000, failures: 0), 3000)
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 3000, failures: 2), 12_000)
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 3000, failures: 6), 192_000)
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 3000, failures: 1000), 192_000, "at most 64 times")
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 0, failures: 0), 0, "the server may ask for none after a connection that worked")
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 0, failures: 1), 200, "not after one that failed")
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 0, failures: 5), 3200)
        XCTAssertEqual(Iterator.reconnectionDelay(retry: -5, failures: 3), 800)
        XCTAssertEqual(Iterator.reconnectionDelay(retry: -5, failures: 0), 0)
        XCTAssertEqual(Iterator.reconnectionDelay(retry: day * 2, failures: 0), day)
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 2_000_000, failures: 6), day)
        for failures in 0...7 {
            XCTAssertEqual(Iterator.reconnectionDelay(retry: 1 << 62, failures: failures), day, "\(failures)")
            XCTAssertEqual(Iterator.reconnectionDelay(retry: Int.max, failures: failures), day, "\(failures)")
        }
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 3000, failures: -1), 3000)
    }

    /// A server that asks for `retry: 0`, then accepts each connection and hangs up before a
    /// byte: each such connection is a failure, and the waits grow (with a floor under the
    /// server's 0). A connection that brings a byte forgives the failures before it.
    func testConnectionsThatEndBeforeAByteCountAsFailures() async throws {
        let connections = Mutex(0)
        server.route("/hangs-up") { _ in
            switch connections.withLock({ count in count += 1; return count }) {
            case 1: return Self.eventStream(["retry: 0\ndata: first\n\n"], ending: .close)
            case 2, 3: return Self.eventStream([], ending: .close)
            case 4: return Self.eventStream([": a heartbeat\n"], ending: .close)
            case 5: return Self.eventStream([], ending: .close)
            default: return TestResponse(status: 503)
            }
        }
        var iterator = manager.events(for: URLRequest(url: try server.url("/hangs-up"))).makeAsyncIterator()
        let first = try await iterator.next()
        XCTAssertEqual(first?.data, "first")
        XCTAssertEqual(iterator.failures, 0)
        do {
            _ = try await iterator.next()
            XCTFail("the 503 must end the stream")
        } catch ResponseStreamError.unexpectedStatus(503) {}
        // Connections 2 and 3 failed; 4 brought a heartbeat; 5 failed: the 6th waited 200 ms.
        XCTAssertEqual(connections.withLock { $0 }, 6)
        XCTAssertEqual(iterator.failures, 1)
    }

    /// `retry: 0`, then connections that each bring a heartbeat and close: the bytes forgave
    /// the failures, so every reconnection went at once, in a loop, while the consumer saw
    /// nothing. Connections without an event now put a floor under the wait.
    func testConnectionsThatBringNoEventAreNotReconnectedToAtOnce() async throws {
        let connections = Mutex(0)
        server.route("/heartbeats") { _ in
            switch connections.withLock({ count in count += 1; return count }) {
            case 1: return Self.eventStream(["retry: 0\ndata: first\n\n"], ending: .close)
            case 2, 3, 4, 6, 7: return Self.eventStream([": a heartbeat\n", "data: half\n"], ending: .close)
            case 5: return Self.eventStream(["data: second\n\n"], ending: .close)
            default: return TestResponse(status: 503)
            }
        }
        var iterator = manager.events(for: URLRequest(url: try server.url("/heartbeats"))).makeAsyncIterator()
        let first = try await iterator.next()
        XCTAssertEqual(first?.data, "first")
        XCTAssertEqual(iterator.eventlessConnections, 0)
        let second = try await iterator.next()
        XCTAssertEqual(second?.data, "second", "the half events were discarded")
        XCTAssertEqual(connections.withLock { $0 }, 5)
        do {
            _ = try await iterator.next()
            XCTFail("the 503 must end the stream")
        } catch ResponseStreamError.unexpectedStatus(503) {}
        XCTAssertEqual(connections.withLock { $0 }, 8)
        XCTAssertEqual(iterator.failures, 0, "every connection brought bytes")
        XCTAssertEqual(iterator.eventlessConnections, 2, "counted since the last event (three before it)")
        XCTAssertEqual(iterator.lastReconnectionDelay, 200, "the 503's connection waited after two eventless ones")
        // The waits eventless connections in a row are followed by.
        typealias Iterator = ServerSentEvents.Iterator
        XCTAssertEqual((1...3).map { Iterator.reconnectionDelay(retry: 0, failures: 0, eventlessConnections: $0) }, [100, 200, 400])
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 0, failures: 0, eventlessConnections: 1_000), 6_400, "at most 6.4 s")
        XCTAssertEqual(Iterator.reconnectionDelay(retry: 3_000, failures: 0, eventlessConnections: 2), 3_000, "the server's wait when longer")
    }

    func testAnErrorAReconnectionCannotCureEndsTheStream() async throws {
        // A scheme Curlew does not speak: every reconnection would fail the same way.
        do {
            for try await _ in manager.events(for: URLRequest(url: URL(string: "ftp://127.0.0.1/stream")!)) {}
            XCTFail("an unsupported scheme must end the stream")
        } catch let error as SessionError {
            guard case .unsupportedScheme = error else { return XCTFail("unexpected \(error)") }
        }
    }

    /// A proxy that refuses the tunnel (a 407 for a wrong password) answers every reconnection
    /// the same: the stream ends with the error. The refusal is libcurl's own error (`.curl`),
    /// which the stream took for a cut in a body's framing and reconnected in a loop, sending
    /// the refused request again and again, `next()` never throwing. A tunnel the proxy could
    /// not open (502) is reconnected.
    func testAProxyThatRefusesTheTunnelEndsTheStream() async throws {
        let connects = Mutex(0)
        let proxy = try ScriptedServer { socket, server in
            server.readHead(socket)
            // The first tunnel cannot be opened (502: reconnected); the second is refused.
            let first = connects.withLock { count -> Bool in
                count += 1
                return count == 1
            }
            let status = first ? "502 Bad Gateway" : "407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"p\""
            server.write(socket, "HTTP/1.1 \(status)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
        defer { proxy.stop() }
        var configuration = SessionConfiguration.default
        configuration.proxy = .url(proxy.baseURLString)
        let proxied = URLSessionManager.raw(configuration)
        defer { proxied.invalidateSessionCancelingTasks(true, resetSession: false) }
        var events = proxied.events(for: URLRequest(url: try XCTUnwrap(URL(string: "https://origin.invalid/stream"))))
        events.defaultRetryInterval = 10
        let ended = expectation(description: "the stream ends")
        let outcome = Mutex<(any Error)?>(nil)
        let consumer = Task { [events] in
            do {
                for try await _ in events {}
            } catch {
                outcome.withLock { $0 = error }
            }
            ended.fulfill()
        }
        await fulfillment(of: [ended], timeout: 30)  // a bound, not a timing: a loop never ends
        consumer.cancel()
        let error = try XCTUnwrap(outcome.withLock { $0 } as? SessionError, "a refused tunnel must end the stream with its error")
        guard case .proxyRefusedTunnel(statusCode: 407, _) = error else { return XCTFail("not the proxy's 407: \(error)") }
        XCTAssertEqual(proxy.received.withLock { $0.count }, 2, "CONNECTs: the 502's and the 407's")
    }

    /// The caller's own `Last-Event-ID` goes with the first connection and is the ID in force
    /// until the server sets one; a bare `id` clears it (WHATWG: then no header is sent). The
    /// caller's header was sent again with every reconnection once the server's ID was empty,
    /// asking the server to replay from the old point.
    func testTheCallersLastEventIDGivesWayToTheServers() async throws {
        let sent = Connections()
        server.route("/resume") { request in
            let attempt = sent.record(request)
            switch attempt {
            case 1: return Self.eventStream(["retry: 10\ndata: before\n\nid\ndata: cleared\n\n"], ending: .close)
            default: return TestResponse(status: 204)
            }
        }
        var request = URLRequest(url: try server.url("/resume"))
        request.setValue("41", forHTTPHeaderField: "Last-Event-ID")
        var received: [ServerSentEvent] = []
        for try await event in manager.events(for: request) { received.append(event) }
        XCTAssertEqual(received, [ServerSentEvent(id: "41", data: "before", retry: 10), ServerSentEvent(data: "cleared")])
        XCTAssertEqual(sent.lastEventIDs, ["41", nil])
    }

    /// Invalidating or resetting the manager while a stream waits to reconnect (here ten
    /// minutes, as the server asked) ends it at once with `.sessionInvalidated`, and nothing
    /// more is sent: the stream slept out its interval holding the manager, and after a reset
    /// connected on the new session with the old one's event ID.
    func testInvalidatingOrResettingTheManagerEndsAStreamWaitingToReconnect() async throws {
        for resets in [false, true] {
            let manager = URLSessionManager.raw()
            let connections = Mutex(0)
            server.route("/wait") { _ in
                connections.withLock { $0 += 1 }
                return Self.eventStream(["retry: 600000\nid: 5\ndata: a\n\n"], ending: .complete)
            }
            let firstEvent = expectation(description: "the first event")
            let ended = expectation(description: "the stream ends")
            let outcome = Mutex<[String]>([])
            let events = manager.events(for: URLRequest(url: try server.url("/wait")))
            let consumer = Task {
                do {
                    for try await event in events {
                        outcome.withLock { $0.append(event.data) }
                        firstEvent.fulfill()
                    }
                    outcome.withLock { $0.append("end") }
                } catch {
                    outcome.withLock { $0.append("\(error)") }
                }
                ended.fulfill()
            }
            await fulfillment(of: [firstEvent], timeout: 30)
            // Until the stream waits (its connection over): a bounded wait, not an assertion.
            for _ in 0..<3000 where manager.engine.sessionEndWaiters.withLock({ $0.count }) == 0 {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            manager.invalidateSessionCancelingTasks(true, resetSession: resets)
            await fulfillment(of: [ended], timeout: 30)  // a bound: the wait was ten minutes
            consumer.cancel()
            XCTAssertEqual(outcome.withLock { $0 }, ["a", "\(SessionError.sessionInvalidated)"], "reset: \(resets)")
            XCTAssertEqual(connections.withLock { $0 }, 1, "reset: \(resets)")
            XCTAssertEqual(manager.engine.sessionEndWaiters.withLock { $0.count }, 0, "a wait left behind")
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            await manager.waitUntilInvalidated()
        }
    }

    /// Cancelling the consumer while its stream waits to reconnect ends the wait, and leaves
    /// no wait behind in the engine; a cancellation before the wait was stored and one after
    /// the session ended are no-ops.
    func testCancellingTheConsumerDuringTheReconnectionWaitLeavesNoWaitBehind() async throws {
        server.route("/later") { _ in Self.eventStream(["retry: 600000\ndata: a\n\n"], ending: .complete) }
        let events = manager.events(for: URLRequest(url: try server.url("/later")))
        let firstEvent = expectation(description: "the first event")
        let ended = expectation(description: "the stream ends")
        let thrown = Mutex<(any Error)?>(nil)
        let consumer = Task {
            do {
                for try await _ in events { firstEvent.fulfill() }
            } catch {
                thrown.withLock { $0 = error }
            }
            ended.fulfill()
        }
        await fulfillment(of: [firstEvent], timeout: 30)
        for _ in 0..<3000 where manager.engine.sessionEndWaiters.withLock({ $0.count }) == 0 {
            try await Task.sleep(nanoseconds: 10_000_000)  // until the stream waits
        }
        XCTAssertEqual(manager.engine.sessionEndWaiters.withLock { $0.count }, 1)
        consumer.cancel()
        await fulfillment(of: [ended], timeout: 30)
        XCTAssertTrue(thrown.withLock { $0 } is CancellationError, "\(String(describing: thrown.withLock { $0 }))")
        XCTAssertEqual(manager.engine.sessionEndWaiters.withLock { $0.count }, 0, "a wait left behind")

        var waiters = SessionEndWaiters()
        let early = waiters.makeID()
        XCTAssertNil(waiters.cancel(early), "nothing stored yet")
        XCTAssertEqual(waiters.count, 1, "the cancellation is kept for the store")
        XCTAssertEqual(waiters.takeAll().count, 0)
    }

    /// Every line is held to `maximumEventSize`, not to a fixed 16 MiB: an `id:` over a small
    /// limit ends the stream (it was kept, and sent back as a `Last-Event-ID` of that size), and
    /// a `data:` line over 16 MiB passes a limit set above it (it failed with `lineTooLong`).
    func testEveryLineIsHeldToTheEventLimit() async throws {
        let longID = Connections()
        server.route("/long-id") { request in
            // Once, then 204: a stream that kept the line ends instead of reconnecting forever.
            guard longID.record(request) == 1 else { return TestResponse(status: 204) }
            return Self.eventStream(["retry: 10\nid: " + String(repeating: "x", count: 2000) + "\n\ndata: ok\n\n"], ending: .complete)
        }
        var small = manager.events(for: URLRequest(url: try server.url("/long-id")))
        small.maximumEventSize = 1024
        do {
            for try await _ in small {}
            XCTFail("an id line over the event limit must end the stream")
        } catch ResponseStreamError.eventTooLarge(let limit) {
            XCTAssertEqual(limit, 1024)
        }
        let big = String(repeating: "y", count: 17 << 20)
        server.route("/big-line", response: Self.eventStream(["data: " + big + "\n\n"], ending: .complete))
        var large = manager.events(for: URLRequest(url: try server.url("/big-line")))
        large.maximumEventSize = 32 << 20
        var iterator = large.makeAsyncIterator()
        let event = try await iterator.next()
        XCTAssertEqual(event?.data.utf8.count, 17 << 20)
    }

    /// A POST's stream (a generation API's) is not sent again on its own: the server's close
    /// ends it, and a cut ends it with the error. Reconnected, the request ran a second time
    /// on the server and its events followed the first run's as if one stream.
    func testAPostsStreamIsNotSentAgain() async throws {
        let posts = Connections()
        server.route("/generate") { request in
            let attempt = posts.record(request)
            if attempt == 1 { return Self.eventStream(["retry: 10\ndata: a\n\n"], ending: .complete) }
            // Closed without the chunked terminator: cut in its framing.
            if attempt == 2 { return Self.eventStream(["retry: 10\ndata: b\n\n", "data: ha"], ending: .close) }
            return TestResponse(status: 204)
        }
        var request = URLRequest(url: try server.url("/generate"))
        request.httpMethod = "POST"
        request.httpBody = Data("{\"prompt\":\"hi\"}".utf8)
        var received: [String] = []
        for try await event in manager.events(for: request) { received.append(event.data) }
        XCTAssertEqual(received, ["a"], "the server's close ends a POST's stream")
        XCTAssertEqual(posts.count, 1)
        received = []
        do {
            for try await event in manager.events(for: request) { received.append(event.data) }
            XCTFail("a cut POST stream must end with the error")
        } catch let error as SessionError {
            guard case .networkLost = error else { return XCTFail("unexpected \(error)") }
        }
        XCTAssertEqual(received, ["b"])
        XCTAssertEqual(posts.count, 2)
    }

    /// The events a chunk completed before an event over `maximumEventSize` are delivered
    /// first, then the error: one write here holds a small event and the large one.
    func testTheEventsBeforeAnEventOverTheLimitInTheSameChunkAreDelivered() async throws {
        server.route("/big", response: TestResponse(
            status: 200, headers: [("Content-Type", "text/event-stream")],
            body: Data("data: a\n\ndata: b\n\ndata: 0123456789abcdefXYZ\n\n".utf8)))
        var events = manager.events(for: URLRequest(url: try server.url("/big")))
        events.maximumEventSize = 16
        var received: [String] = []
        do {
            for try await event in events { received.append(event.data) }
            XCTFail("an event over the limit must throw")
        } catch let error as ResponseStreamError {
            XCTAssertEqual(error, .eventTooLarge(limit: 16))
        }
        XCTAssertEqual(received, ["a", "b"], "the events before the large one were lost with it")
    }

    func testAnIDThatCannotBeAHeaderIsNotSentBack() async throws {
        let lastIDs = Connections()
        server.route("/odd") { request in
            let attempt = lastIDs.record(request)
            if attempt == 1 { return Self.eventStream(["retry: 5\nid: a\u{1}b\ndata: one\n\n"], ending: .close) }
            return TestResponse(status: 204)
        }
        var received: [ServerSentEvent] = []
        for try await event in manager.events(for: URLRequest(url: try server.url("/odd"))) { received.append(event) }
        XCTAssertEqual(received, [ServerSentEvent(id: "a\u{1}b", data: "one", retry: 5)])
        XCTAssertEqual(lastIDs.lastEventIDs, [nil, nil], "the reconnection goes out without it instead of failing")
    }

    func testAnotherStatusEndsTheStreamWithAnErrorAndNoReconnection() async throws {
        server.route("/denied", response: .text("no", status: 403))
        do {
            for try await _ in manager.events(for: URLRequest(url: try server.url("/denied"))) {}
            XCTFail("403 must end the stream with an error")
        } catch let error as ResponseStreamError {
            XCTAssertEqual(error, .unexpectedStatus(403))
        }
        XCTAssertEqual(server.requests.count, 1)
    }

    func testAnotherContentTypeEndsTheStreamWithAnError() async throws {
        server.route("/json", response: .json("{}"))
        do {
            for try await _ in manager.events(for: URLRequest(url: try server.url("/json"))) {}
            XCTFail("application/json is not an event stream")
        } catch let error as ResponseStreamError {
            XCTAssertEqual(error, .unexpectedContentType("application/json"))
        }
        XCTAssertEqual(server.requests.count, 1)
    }

    func testCancellingTheConsumerClosesTheConnection() async throws {
        server.route("/live", response: Self.eventStream(
            ["data: one\n\n"] + Array(repeating: ": keep-alive\n", count: 1000), ending: .complete, delay: .milliseconds(50)))
        let first = expectation(description: "first event")
        let consumer = Task { [manager, server] in
            var count = 0
            for try await _ in manager!.events(for: URLRequest(url: try server!.url("/live"))) {
                count += 1
                first.fulfill()
            }
            return count
        }
        await fulfillment(of: [first], timeout: 30)
        consumer.cancel()
        do {
            _ = try await consumer.value
            XCTFail("a cancelled consumer must throw")
        } catch {
            XCTAssertTrue(error is CancellationError || (error as? SessionError) == .cancelled, "\(error)")
        }
        XCTAssertTrue(server.waitForAllConnectionsClosed())
        XCTAssertEqual(server.requests.count, 1, "no reconnection after the consumer left")
    }
}

/// A compression bomb on an event stream whose consumer is behind, under a decompression limit
/// that allows it: libcurl's own buffer for a paused transfer (64 MiB) overflows. That is
/// memory running out, which the same server would cause again: the sequence ends with it.
/// It was taken for a cut connection, and the sequence connected again and again.
final class ServerSentEventsBombTests: XCTestCase {
    func testAPauseBufferOverflowEndsTheSequenceWithoutReconnecting() async throws {
        let server = try TestServer()
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.receiveBufferSize = 256 << 10  // one read holds a large part of the bomb
        configuration.decompressionLimit = 1 << 40
        let manager = URLSessionManager.raw(configuration)
        // 200 MiB of one event of 1 KB, over and over, gzip'd twice (3 KB): any read of it
        // decodes to more than 64 MiB.
        let bomb = try Gzip.output(of: "yes 'data: \(String(repeating: "x", count: 1000))\n' | head -c 200M | gzip -c -9 | gzip -c -9")
        let connections = Mutex(0)
        server.route("/bomb") { _ in
            connections.withLock { $0 += 1 }
            return TestResponse(
                status: 200, headers: [("Content-Type", "text/event-stream"), ("Content-Encoding", "gzip, gzip")], body: bomb)
        }
        var events = manager.events(for: URLRequest(url: try server.url("/bomb")))
        events.defaultRetryInterval = 5
        var received = 0
        do {
            for try await _ in events {
                received += 1
                if received == 1 { try await Task.sleep(nanoseconds: 300_000_000) }  // behind: the stream fills
                if received > 300_000 { break }  // more than the bomb holds: it came again
                if connections.withLock({ $0 }) > 1 { break }  // connected again: fails below
            }
            XCTFail("the sequence ended without an error after \(received) events")
        } catch {
            guard case .curl(let code, _)? = error as? SessionError else {
                return XCTFail("expected libcurl's out of memory, got \(error)")
            }
            XCTAssertEqual(code, 27)
        }
        XCTAssertEqual(connections.withLock { $0 }, 1, "the sequence connected again")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        server.shutdown()
    }
}
