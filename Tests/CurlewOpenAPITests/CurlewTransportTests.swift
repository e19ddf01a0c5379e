import CurlewHTTPTypes
@testable import CurlewOpenAPI
import CurlewTestSupport
import Foundation
import HTTPTypes
import OpenAPIRuntime
import Security
import Serialization
import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client swift-openapi-generator made from `OpenAPI/openapi.yaml` (committed in
/// `Generated/`), running on `CurlewTransport` against servers on loopback.
final class CurlewTransportTests: XCTestCase {
    var manager: URLSessionManager!

    override func setUp() {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        manager = URLSessionManager(configuration: configuration)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    private func client(_ server: TestServer) throws -> Client {
        Client(serverURL: try server.url("/api"), transport: CurlewTransport(manager: manager))
    }

    private func notesServer() throws -> TestServer {
        let server = try TestServer()
        server.route("/api/greet") { request in
            let name = URLComponents(string: request.uri)?.queryItems?.first { $0.name == "name" }?.value ?? "stranger"
            return .json("{\"message\":\"Hello, \(name)!\"}")
        }
        server.route("/api/notes", method: "POST") { request in
            guard var note = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any],
                let title = note["title"] as? String, !title.isEmpty
            else {
                return .json("{\"reason\":\"a note needs a title\"}", status: 400)
            }
            note["id"] = 42
            let body = (try? JSONSerialization.data(withJSONObject: note, options: [.sortedKeys])) ?? Data()
            return .json(String(decoding: body, as: UTF8.self), status: 201)
        }
        return server
    }

    func testJSONRoundTrips() async throws {
        let server = try notesServer()
        defer { server.shutdown() }
        let client = try client(server)

        let greeting = try await client.greet(query: .init(name: "Curlew"))
        XCTAssertEqual(try greeting.ok.body.json.message, "Hello, Curlew!")

        let created = try await client.createNote(body: .json(.init(title: "pins", tags: ["tls", "spki"], pinned: true)))
        let note = try created.created.body.json
        XCTAssertEqual(note.id, 42)
        XCTAssertEqual(note.title, "pins")
        XCTAssertEqual(note.tags, ["tls", "spki"])
        XCTAssertEqual(note.pinned, true)
        let sent = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(sent.header("Content-Type"), "application/json; charset=utf-8")

        let refused = try await client.createNote(body: .json(.init(title: "", tags: [])))
        XCTAssertEqual(try refused.badRequest.body.json.reason, "a note needs a title")
    }

    /// The manager's retrier applies to the transport's calls: a 503 the `RetryPolicy` retries
    /// never reaches the generated client, which gets the retried answer (the transport's
    /// response streams, so the failure is held back until the retrier has decided).
    func testTheManagersRetryPolicyRetriesAFailedCall() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let calls = Mutex(0)
        server.route("/api/greet") { _ in
            let call = calls.withLock { calls -> Int in
                calls += 1
                return calls
            }
            return call == 1 ? .json("{\"reason\":\"busy\"}", status: 503) : .json("{\"message\":\"Hello, again!\"}")
        }
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0)
        let greeting = try await client(server).greet()
        XCTAssertEqual(try greeting.ok.body.json.message, "Hello, again!")
        XCTAssertEqual(server.requests.count, 2)
    }

    /// A call with a body the generated client can read twice (its JSON) is retried like any
    /// other: the body is collected first, so the retry sends it again whole. A transport
    /// told to keep no body that large streams it, and then the call is never sent twice.
    func testACallWithAJSONBodyIsRetriedWithItsBody() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let calls = Mutex(0)
        server.route("/api/notes", method: "POST") { _ in
            let call = calls.withLock { calls -> Int in
                calls += 1
                return calls
            }
            return call.isMultiple(of: 2)
                ? .json("{\"id\":42,\"title\":\"retried\",\"tags\":[]}", status: 201)
                : .json("{\"reason\":\"busy\"}", status: 503)
        }
        manager.requestRetrier = RetryPolicy(exponentialBackoffScale: 0.01, jitter: 0, retryableHTTPMethods: ["POST"])
        let created = try await client(server).createNote(body: .json(.init(title: "retried", tags: [])))
        XCTAssertEqual(try created.created.body.json.id, 42)
        XCTAssertEqual(server.requests.count, 2)
        let bodies = server.requests.map(\.body)
        XCTAssertEqual(bodies.first, bodies.last, "the retry sends the same body")
        XCTAssertEqual(
            (try JSONSerialization.jsonObject(with: try XCTUnwrap(bodies.last)) as? [String: Any])?["title"] as? String,
            "retried")

        var streaming = CurlewTransport(manager: manager)
        streaming.maximumReplayableBodySize = 8
        let once = Client(serverURL: try server.url("/api"), transport: streaming)
        let refused = try await once.createNote(body: .json(.init(title: "streamed", tags: [])))
        guard case .undocumented(statusCode: 503, _) = refused else { return XCTFail("\(refused)") }
        XCTAssertEqual(server.requests.count, 3, "a streamed body is not sent twice")
    }

    /// Token refresh through the transport: the server refuses the first token of a
    /// `createNote` POST with a 401, the `AuthenticationInterceptor` refreshes it once and the
    /// call goes again with its body and the new token; the client sees only the 201.
    func testAnExpiredTokenOnAPostIsRefreshedAndTheCallSentAgain() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/api/notes", method: "POST") { request in
            request.header("Authorization") == "Bearer fresh"
                ? .json("{\"id\":7,\"title\":\"t\",\"tags\":[]}", status: 201)
                : TestResponse(status: 401, headers: [("WWW-Authenticate", "Bearer")], body: Data())
        }
        let authenticator = BearerAuthenticator()
        manager.interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: BearerToken(value: "stale"))
        let created = try await client(server).createNote(body: .json(.init(title: "t", tags: [])))
        XCTAssertEqual(try created.created.body.json.id, 7)
        XCTAssertEqual(authenticator.refreshes.withLock { $0 }, 1)
        XCTAssertEqual(server.requests.map { $0.header("Authorization") }, ["Bearer stale", "Bearer fresh"])
        XCTAssertEqual(server.requests.first?.body, server.requests.last?.body, "the body went again")
    }

    /// Which bodies are collected to be sent again: read-many ones within the limit (also of
    /// unknown length), never a read-once body, and a read-many body past the limit is left
    /// whole to be streamed from its start.
    func testOnlyABodyThatCanBeReadAgainIsCollected() async throws {
        var transport = CurlewTransport(manager: manager)
        transport.maximumReplayableBodySize = 10
        func chunks(_ parts: [String], _ behavior: IterationBehavior) -> HTTPBody {
            HTTPBody(ChunkList(chunks: parts.map { ArraySlice(Array($0.utf8)) }), length: .unknown, iterationBehavior: behavior)
        }
        let small = try await transport.replayableBytes(of: chunks(["abc", "def"], .multiple))
        XCTAssertEqual(small.map { String(decoding: $0, as: UTF8.self) }, "abcdef")
        let readOnce = try await transport.replayableBytes(of: chunks(["abc"], .single))
        XCTAssertNil(readOnce)
        let large = chunks(["abcdef", "ghijkl"], .multiple)
        let tooLarge = try await transport.replayableBytes(of: large)
        XCTAssertNil(tooLarge)
        let whole = try await Data(collecting: large, upTo: 100)
        XCTAssertEqual(String(decoding: whole, as: UTF8.self), "abcdefghijkl", "read again from its start")
        let knownTooLarge = try await transport.replayableBytes(of: HTTPBody(Array(repeating: 1, count: 11)))
        XCTAssertNil(knownTooLarge)
        let knownAtLimit = try await transport.replayableBytes(of: HTTPBody(Array(repeating: 1, count: 10)))
        XCTAssertEqual(knownAtLimit?.count, 10)
        transport.maximumReplayableBodySize = 0
        let none = try await transport.replayableBytes(of: HTTPBody("a"))
        XCTAssertNil(none)
    }

    func testAHundredMegabyteDownloadStreamsWithFlatMemory() async throws {
        let total = 100 << 20
        let server = try RawLoopbackServer(.serve(bytes: total))
        let client = Client(
            serverURL: URL(string: "http://127.0.0.1:\(server.port)/api")!, transport: CurlewTransport(manager: manager))
        XCTAssertTrue(resetPeakResident())
        let baseline = residentKilobytes()
        let output = try await client.downloadBlob()
        let body = try output.ok.body.binary
        XCTAssertEqual(body.length, .known(Int64(total)))
        var received = 0
        var mismatch = false
        for try await chunk in body {
            // The pattern the server writes: byte i of each 64 KiB block is i * 7 (checked at
            // every 997th position of the body, cheap in a debug build).
            var offset = (997 - received % 997) % 997
            while offset < chunk.count {
                if chunk[chunk.startIndex + offset] != UInt8(truncatingIfNeeded: ((received + offset) % 65536) &* 7) { mismatch = true }
                offset += 997
            }
            received += chunk.count
        }
        let peak = residentKilobytes("VmHWM")
        XCTAssertEqual(received, total)
        XCTAssertFalse(mismatch, "the body must arrive byte for byte")
        XCTAssertLessThan(peak - baseline, 48 * 1024, "RSS grew by \(peak - baseline) KiB reading 100 MiB")
    }

    func testAHundredMegabyteUploadStreamsWithFlatMemory() async throws {
        let total = 100 << 20
        let piece = 256 << 10
        let server = try RawLoopbackServer(.count)
        let client = Client(
            serverURL: URL(string: "http://127.0.0.1:\(server.port)/api")!, transport: CurlewTransport(manager: manager))
        // Made on demand: the body exists only as the transport asks for it.
        let made = Mutex(0)
        let variants = (0..<4).map { variant in ArraySlice((0..<piece).map { UInt8(truncatingIfNeeded: $0 &+ variant) }) }
        let chunks = AsyncStream<ArraySlice<UInt8>> {
            let index = made.withLock { count -> Int in
                defer { count += 1 }
                return count
            }
            guard index < total / piece else { return nil }
            return variants[index % 4]
        }
        XCTAssertTrue(resetPeakResident())
        let baseline = residentKilobytes()
        let output = try await client.uploadBlob(body: .binary(HTTPBody(chunks, length: .known(Int64(total)))))
        let receipt = try output.ok.body.json
        XCTAssertEqual(receipt.bytes, Int64(total))
        var checksum: UInt64 = 0
        for position in stride(from: 0, to: total, by: 997) {
            checksum = checksum &* 31 &+ UInt64(UInt8(truncatingIfNeeded: position % piece &+ (position / piece) % 4))
        }
        XCTAssertEqual(receipt.checksum, Int64(bitPattern: checksum))
        let grown = residentKilobytes("VmHWM") - baseline
        XCTAssertLessThan(grown, 48 * 1024, "peak RSS grew by \(grown) KiB sending 100 MiB")
    }

    func testThePinnedServerIsAcceptedAndAnotherRefusedInTheHandshake() async throws {
        let certificates = try TestCertificates.shared()
        let server = try TestServer(tls: TestServerTLS(
            certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM))
        defer { server.shutdown() }
        server.route("/api/greet", response: .json("{\"message\":\"pinned\"}"))
        let root = try Certificate(contentsOf: certificates.root.certificatePEM)

        var pinned = SecurityPolicy(
            pinningMode: .publicKey, pinnedCertificates: [try Certificate(contentsOf: certificates.leaf.certificatePEM)])
        pinned.trustedRootCertificates = [root]
        manager.securityPolicy = pinned
        let accepted = try await client(server).greet()
        XCTAssertEqual(try accepted.ok.body.json.message, "pinned")

        let other = URLSessionManager(configuration: manager.configuration)
        defer { other.invalidateSessionCancelingTasks(true, resetSession: false) }
        var wrong = SecurityPolicy(
            pinningMode: .publicKey, pinnedCertificates: [try Certificate(contentsOf: certificates.leafNewKey.certificatePEM)])
        wrong.trustedRootCertificates = [root]
        other.securityPolicy = wrong
        let refusing = Client(serverURL: try server.url("/api"), transport: CurlewTransport(manager: other))
        do {
            _ = try await refusing.greet()
            XCTFail("a server whose key is not pinned must be refused")
        } catch let error as ClientError {
            guard case .serverTrustEvaluationFailed = error.underlyingError as? SessionError else {
                return XCTFail("unexpected \(error.underlyingError)")
            }
        }
        XCTAssertEqual(server.requests.count, 1, "the refused request never reached the server")
    }

    func testCancellingTheCallerCancelsTheTransfer() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        var slow = TestResponse(status: 200, headers: [("Content-Type", "application/json")])
        slow.body = .stream([TestResponse.Chunk(Data("{}".utf8), delay: .seconds(600))])
        slow.framing = .chunked
        server.route("/api/greet", response: slow)
        let client = try client(server)
        let call = Task { try await client.greet() }
        XCTAssertTrue(server.waitForRequests(count: 1))
        call.cancel()
        do {
            _ = try await call.value
            XCTFail("a cancelled call must throw")
        } catch {}
        XCTAssertTrue(server.waitForAllConnectionsClosed())
    }

    /// Cancel × the body's collection: a call cancelled while the transport collects a body
    /// that may be read again sends nothing, although the body's sequence ends quietly at the
    /// cancellation (as `AsyncStream` does), which the collection cannot tell from its end.
    func testACallCancelledWhileItsBodyIsCollectedSendsNothing() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/api/upload", method: "POST") { request in .text("\(request.body.count)") }
        server.route("/api/probe", response: .text("probe"))
        let transport = CurlewTransport(manager: manager)
        let baseURL = try server.url("/api")
        // Through `send`: the call throws and nothing reaches the server (the manager would
        // not start a cancelled caller's transfer either).
        let stalled = StallFlag()
        let body = HTTPBody(StallingBody(stalled: stalled), length: .unknown, iterationBehavior: .multiple)
        let call = Task {
            try await transport.send(
                HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/upload"), body: body, baseURL: baseURL,
                operationID: "upload")
        }
        for _ in 0..<3000 where !stalled.isSet { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(stalled.isSet, "the body was not read")
        call.cancel()
        do {
            let (head, _) = try await call.value
            XCTFail("a cancelled call was answered: \(head.status)")
        } catch {}
        let (probe, _) = try await manager.data(for: URLRequest(url: try server.url("/api/probe")))
        XCTAssertEqual(probe, Data("probe".utf8))
        XCTAssertEqual(server.requests.map(\.path), ["/api/probe"], "the part of a body read before the cancel was sent")
        // The collection itself: the part read is not taken for the whole body.
        let stalledAgain = StallFlag()
        let again = HTTPBody(StallingBody(stalled: stalledAgain), length: .unknown, iterationBehavior: .multiple)
        let collection = Task { try await transport.replayableBytes(of: again) }
        for _ in 0..<3000 where !stalledAgain.isSet { try await Task.sleep(nanoseconds: 10_000_000) }
        collection.cancel()
        do {
            let collected = try await collection.value
            XCTFail("a cancelled collection gave \(collected.map { "\($0.count) bytes" } ?? "nil")")
        } catch {
            XCTAssertTrue(error is CancellationError, "\(error)")
        }
    }

    /// Counts cancels and completions, on its own queue.
    private final class CancelCounter: EventMonitor {
        let cancels = Mutex(0)
        let completions = Mutex(0)
        func taskDidCancel(_ task: SessionTask) { cancels.withLock { $0 += 1 } }
        func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) { completions.withLock { $0 += 1 } }
    }

    /// A bodiless answer (a HEAD's, a 204) is returned with no body, and the stream the
    /// transport then drops — or a small body all in, which the caller drops unread — belongs
    /// to a transfer that ends by itself: it is not cancelled,
    /// so the monitors never hear a successful call cancelled (they did for about a third of
    /// these calls) and the connection is kept.
    func testABodilessAnswerIsNotReportedAsACancelledCall() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/api/thing", response: TestResponse(status: 200, body: Data("x".utf8)))
        server.route("/api/nothing", response: TestResponse(status: 204))
        server.route("/api/echo", response: TestResponse(status: 201, body: Data("{\"id\":1}".utf8)))
        let counter = CancelCounter()
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        let monitored = URLSessionManager(configuration: configuration, eventMonitors: [counter])
        let transport = CurlewTransport(manager: monitored)
        let baseURL = try server.url("/api")
        let calls = 200
        for index in 0..<calls {
            switch index % 3 {
            case 0, 1:
                let isHead = index % 3 == 0
                let (head, body) = try await transport.send(
                    HTTPRequest(method: isHead ? .head : .delete, scheme: nil, authority: nil, path: isHead ? "/thing" : "/nothing"),
                    body: nil, baseURL: baseURL, operationID: isHead ? "look" : "remove")
                XCTAssertNil(body)
                XCTAssertEqual(head.status.code, isHead ? 200 : 204)
            default:
                // A small body the caller drops unread (a response without a schema): it came
                // with its head, and the call ended by itself.
                let (head, body) = try await transport.send(
                    HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/echo"), body: nil, baseURL: baseURL,
                    operationID: "create")
                XCTAssertNotNil(body)
                XCTAssertEqual(head.status.code, 201)
            }
        }
        // Bounded wait for the monitor's queue to hear every completion.
        for _ in 0..<3000 where counter.completions.withLock({ $0 }) < calls { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(counter.completions.withLock { $0 }, calls, "every call's completion reached the monitor")
        XCTAssertEqual(counter.cancels.withLock { $0 }, 0, "successful calls were reported cancelled")
        XCTAssertEqual(server.connections.count, 1, "one connection kept for every call")
        monitored.invalidateSessionCancelingTasks(true, resetSession: false)
        await monitored.waitUntilInvalidated()
    }

    /// The operation's path reaches the server as the runtime rendered it: a path parameter
    /// of ".." or "." (unreserved, so not percent-encoded) went to another resource once
    /// libcurl removed the dot segments (`DELETE /api/notes/..` deleted at `/api/`), and an
    /// empty first parameter (`//objects`) was read as a host name and dropped.
    func testTheOperationPathIsSentAsRendered() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let transport = CurlewTransport(manager: manager)
        let baseURL = try server.url("/api")
        for path in ["/notes/..", "/notes/./x", "//objects", "//x/y?q=1", "/a b?q=c d", "pets?q=1"] {
            _ = try await transport.send(
                HTTPRequest(method: .delete, scheme: nil, authority: nil, path: path), body: nil, baseURL: baseURL,
                operationID: "remove")
        }
        // A character a URL cannot hold as it is goes percent-encoded (it stopped the process).
        XCTAssertEqual(
            server.requests.map(\.uri), ["/api/notes/..", "/api/notes/./x", "/api//objects", "/api//x/y?q=1", "/api/a%20b?q=c%20d", "/api/pets?q=1"])
        // A relative path is a segment below the base's path, with or without one (it made
        // `/apipets`, and no URL at all for a base without a path).
        let noPath = try CurlewTransport.urlRequest(
            for: HTTPRequest(method: .get, scheme: nil, authority: nil, path: "pets"), baseURL: try XCTUnwrap(URL(string: "http://h.test")))
        XCTAssertEqual(noPath.url?.absoluteString, "http://h.test/pets")
    }

    /// A response framed by chunks with a `Content-Length` alongside (which libcurl ignores, as
    /// RFC 9112 §6.3 says): the body's length is not that field's, or a reader collecting with a
    /// limit was refused up front and a gateway passing the body on announced the wrong length.
    func testAChunkedResponseBodyHasNoKnownLength() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/api/chunked", response: TestResponse.stream(
            [TestResponse.Chunk(Data("abc".utf8))], headers: [("Content-Length", "1000")], framing: .chunked))
        let transport = CurlewTransport(manager: manager)
        let (response, body) = try await transport.send(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/chunked"), body: nil,
            baseURL: try server.url("/api"), operationID: "chunked")
        XCTAssertEqual(response.headerFields[.transferEncoding], "chunked")
        let received = try XCTUnwrap(body)
        XCTAssertEqual(received.length, .unknown)
        let collected = try await ArraySlice(collecting: received, upTo: 100)
        XCTAssertEqual(collected, ArraySlice("abc".utf8))
    }

    /// A body that may be read again is collected, and its bytes must be as many as its
    /// `.known` length says: a body that disagrees was sent with its own count, the declared
    /// one silently ignored (a streamed body is held to its length as it goes).
    func testACollectedBodyThatDisagreesWithItsLengthIsRefused() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/api/put", method: "PUT", response: TestResponse(status: 204))
        let transport = CurlewTransport(manager: manager)
        for declared in [4, 20] as [Int64] {
            let body = HTTPBody(ArraySlice(Data(repeating: 7, count: 10)), length: .known(declared), iterationBehavior: .multiple)
            do {
                _ = try await transport.send(
                    HTTPRequest(method: .put, scheme: nil, authority: nil, path: "/put"), body: body,
                    baseURL: try server.url("/api"), operationID: "put")
                XCTFail("a body of 10 bytes declared as \(declared) was sent")
            } catch let error as SessionError {
                guard case .bodyStreamFailed(let detail) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(detail.contains("10 bytes") && detail.contains("\(declared)"), detail)
            }
        }
        let exact = HTTPBody(ArraySlice(Data(repeating: 7, count: 10)), length: .known(10), iterationBehavior: .multiple)
        let (response, _) = try await transport.send(
            HTTPRequest(method: .put, scheme: nil, authority: nil, path: "/put"), body: exact,
            baseURL: try server.url("/api"), operationID: "put")
        XCTAssertEqual(response.status.code, 204)
        XCTAssertEqual(server.requests.map(\.body), [Data(repeating: 7, count: 10)], "only the body that agrees went")
    }

    /// A streamed body (read once) longer than its `.known` length, answered with no body (a
    /// 204, a 304): the surplus fails the transfer at its end, which the transport
    /// did not wait for when it had no body to hand out, so the call passed for sent as
    /// declared. An answer with a body carries the same error to its reader.
    func testAStreamedBodyLongerThanItsLengthFailsABodilessCall() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/api/put", method: "PUT", response: TestResponse(status: 204))
        server.route("/api/kept", method: "PATCH", response: TestResponse(status: 304))
        let transport = CurlewTransport(manager: manager)
        for (method, path) in [(HTTPRequest.Method.put, "/put"), (.patch, "/kept")] {
            let body = HTTPBody(ArraySlice(Data(repeating: 7, count: 10)), length: .known(4), iterationBehavior: .single)
            do {
                let (response, _) = try await transport.send(
                    HTTPRequest(method: method, scheme: nil, authority: nil, path: path), body: body,
                    baseURL: try server.url("/api"), operationID: "put")
                XCTFail("\(method): a body of 10 bytes declared as 4 passed for sent (\(response.status.code))")
            } catch let error as SessionError {
                guard case .bodyStreamFailed(let detail) = error else { return XCTFail("\(method): \(error)") }
                XCTAssertTrue(detail.contains("longer than its declared length"), detail)
            }
        }
        // The declared length met: the bodiless answer is the result.
        let exact = HTTPBody(ArraySlice(Data(repeating: 7, count: 4)), length: .known(4), iterationBehavior: .single)
        let (response, received) = try await transport.send(
            HTTPRequest(method: .put, scheme: nil, authority: nil, path: "/put"), body: exact,
            baseURL: try server.url("/api"), operationID: "put")
        XCTAssertEqual(response.status.code, 204)
        XCTAssertNil(received)
        XCTAssertEqual(server.requests.last?.body, Data(repeating: 7, count: 4))
    }

    /// `upload(for: HTTPRequest, ...)` collects the response body, so the configuration's
    /// `maximumCollectedBodyBytes` holds for it as for the `URLRequest` form: announced larger,
    /// or grown larger (chunked), it fails rather than filling memory.
    func testAnHTTPTypesUploadKeepsTheCollectedBodyLimit() async throws {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.maximumCollectedBodyBytes = 1024
        let limited = URLSessionManager(configuration: configuration)
        defer { limited.invalidateSessionCancelingTasks(true, resetSession: false) }
        let server = try TestServer()
        defer { server.shutdown() }
        let large = Data(repeating: 1, count: 64 * 1024)
        server.route("/announced", method: "POST", response: TestResponse(status: 200, body: large))
        server.route("/chunked", method: "POST", response: TestResponse.stream(
            stride(from: 0, to: large.count, by: 4096).map { TestResponse.Chunk(large.subdata(in: $0..<($0 + 4096))) }))
        server.route("/small", method: "POST", response: TestResponse(status: 200, body: Data(repeating: 2, count: 1024)))
        func upload() -> AsyncStream<Data> {
            AsyncStream { continuation in
                continuation.yield(Data("x".utf8))
                continuation.finish()
            }
        }
        for path in ["/announced", "/chunked"] {
            do {
                let (data, _) = try await limited.upload(for: HTTPRequest(method: .post, url: try server.url(path)), from: upload(), length: 1)
                XCTFail("\(path): \(data.count) bytes kept past the limit")
            } catch {
                XCTAssertEqual(error as? SessionError, .responseBodyTooLarge(limit: 1024), path)
            }
        }
        let (data, response) = try await limited.upload(
            for: HTTPRequest(method: .post, url: try server.url("/small")), from: upload(), length: 1)
        XCTAssertEqual(response.status.code, 200)
        XCTAssertEqual(data, Data(repeating: 2, count: 1024), "a body at the limit is kept")
    }

    func testHTTPTypesKeepFieldOrderAndRepeatedFields() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/fields", response: TestResponse(
            status: 200,
            headers: [("Set-Cookie", "a=1"), ("X-Order", "first"), ("Set-Cookie", "b=2"), ("Content-Type", "text/plain")],
            body: Data("ok".utf8)))
        var request = HTTPRequest(method: .get, url: try server.url("/fields?x=1"))
        request.headerFields.append(HTTPField(name: .cookie, value: "c=3"))
        request.headerFields.append(HTTPField(name: .cookie, value: "d=4"))
        let (data, response) = try await manager.data(for: request)
        XCTAssertEqual(data, Data("ok".utf8))
        XCTAssertEqual(response.status, .ok)
        XCTAssertEqual(response.headerFields[values: .setCookie], ["a=1", "b=2"])
        let names = response.headerFields.map(\.name.rawName).filter { $0 != "Content-Length" && $0 != "Connection" }
        XCTAssertEqual(names, ["Set-Cookie", "X-Order", "Set-Cookie", "Content-Type"])
        XCTAssertEqual(server.requests.last?.header("Cookie"), "c=3; d=4")
        XCTAssertEqual(server.requests.last?.uri, "/fields?x=1")
    }

    /// A field value in Latin-1 (`obs-text`, as an older server sends `José`) keeps its bytes
    /// through `HTTPResponse`: it was decoded to a string first, its é lost to U+FFFD for good.
    func testAFieldValueThatIsNotUTF8KeepsItsBytes() async throws {
        let head = Array("HTTP/1.1 200 OK\r\nX-Name: Jos".utf8) + [0xE9]
            + Array("\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".utf8)
        let server = try RawLoopbackServer(.answer(head))
        let (data, response) = try await manager.data(
            for: HTTPRequest(method: .get, url: try XCTUnwrap(URL(string: "http://127.0.0.1:\(server.port)/name"))))
        XCTAssertEqual(data, Data("ok".utf8))
        let field = try XCTUnwrap(response.headerFields.first { $0.name.rawName == "X-Name" })
        XCTAssertEqual(field.withUnsafeBytesOfValue { Array($0) }, Array("Jos".utf8) + [0xE9])
        // And back: a head made from the response keeps the byte too.
        let again = HTTPResponse(HTTPResponseHead(response, url: URL(fileURLWithPath: "/")))
        let kept = try XCTUnwrap(again.headerFields.first { $0.name.rawName == "X-Name" })
        XCTAssertEqual(kept.withUnsafeBytesOfValue { Array($0) }, Array("Jos".utf8) + [0xE9])
    }

    /// Credentials in a URL go with the request as libcurl sends them (`Authorization: Basic`,
    /// percent-decoded); they were dropped with the authority's userinfo. A request's own
    /// `Authorization` wins.
    func testCredentialsInTheURLBecomeBasicAuthorization() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/who") { _ in .json("{}") }
        var components = try XCTUnwrap(URLComponents(url: try server.url("/who"), resolvingAgainstBaseURL: false))
        components.percentEncodedUser = "ann"
        components.percentEncodedPassword = "p%40ss"
        let request = try HTTPRequest(URLRequest(url: try XCTUnwrap(components.url)))
        XCTAssertFalse(request.authority?.contains("@") ?? true)
        let expected = "Basic " + Data("ann:p@ss".utf8).base64EncodedString()
        XCTAssertEqual(request.headerFields[.authorization], expected)
        _ = try await manager.data(for: request)
        XCTAssertEqual(server.requests.last?.header("Authorization"), expected)

        var own = URLRequest(url: try XCTUnwrap(components.url))
        own.setValue("Bearer mine", forHTTPHeaderField: "Authorization")
        XCTAssertEqual(try HTTPRequest(own).headerFields[.authorization], "Bearer mine")

        // Escapes that are not UTF-8 are the bytes libcurl sends (the password was lost); a
        // user alone is "user:"; an empty userinfo is none.
        func authorization(_ url: String) throws -> String? {
            try HTTPRequest(URLRequest(url: try XCTUnwrap(URL(string: url)))).headerFields[.authorization]
        }
        XCTAssertEqual(try authorization("http://ann:p%E9ss@example.com/"), "Basic " + Data(Array("ann:p".utf8) + [0xE9] + Array("ss".utf8)).base64EncodedString())
        XCTAssertEqual(try authorization("http://ann@example.com/"), "Basic " + Data("ann:".utf8).base64EncodedString())
        XCTAssertNil(try authorization("http://@example.com/"))
    }

    func testConversionEdgeCases() throws {
        var bare = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/x")
        XCTAssertThrowsError(try URLRequest(bare)) { XCTAssertEqual($0 as? HTTPTypesConversionError, .missingSchemeOrAuthority) }
        bare = HTTPRequest(method: .options, scheme: "https", authority: "example.com", path: "*")
        XCTAssertThrowsError(try URLRequest(bare)) { XCTAssertEqual($0 as? HTTPTypesConversionError, .unsupportedTarget("*")) }
        // A plain CONNECT names a tunnel, not a resource (it was refused for its missing
        // scheme, or sent as `CONNECT /` with one).
        for scheme in [nil, "https"] {
            let connect = HTTPRequest(method: .connect, scheme: scheme, authority: "example.com:443", path: nil)
            XCTAssertThrowsError(try URLRequest(connect)) {
                XCTAssertEqual($0 as? HTTPTypesConversionError, .unsupportedTarget("CONNECT example.com:443"))
            }
        }
        // An authority is a host and a port: userinfo, a path, a query or a fragment would
        // move the request elsewhere (`good.example@evil.example` connected to evil.example).
        for authority in ["good.example@evil.example", "evil.example#.good.example", "h/x?", "h ost"] {
            let request = HTTPRequest(method: .get, scheme: "https", authority: authority, path: "/")
            XCTAssertThrowsError(try URLRequest(request), authority) {
                XCTAssertEqual($0 as? HTTPTypesConversionError, .invalidURL(authority))
            }
        }
        XCTAssertNoThrow(try URLRequest(HTTPRequest(method: .get, scheme: "https", authority: "[::1]:8443", path: "/")))

        // A field that cannot be sent as it is is refused, not dropped or rewritten (a skipped
        // `X Api Key` was a credential lost without a word).
        // (Foundation itself drops a value with CR, LF or NUL; DEL it keeps, and `HTTPField` rewrote it.)
        for (name, value) in [("X Api Key", "k"), ("X-Del", "a\u{7f}b")] {
            var unsendable = URLRequest(url: URL(string: "https://example.com/")!)
            unsendable.setValue(value, forHTTPHeaderField: name)
            XCTAssertThrowsError(try HTTPRequest(unsendable), name) {
                XCTAssertEqual($0 as? HTTPTypesConversionError, .invalidHeaderField(name))
            }
        }
        // `Host` is the authority: the same name is one field, another host is refused both
        // ways and in the transport (libcurl would send it and pick that host's cookies).
        let hostName = try XCTUnwrap(HTTPField.Name("Host"))
        var hosted = URLRequest(url: URL(string: "https://example.com/")!)
        for same in ["EXAMPLE.com", "example.com.", "example.com:443"] {
            hosted.setValue(same, forHTTPHeaderField: "Host")
            XCTAssertNil(try HTTPRequest(hosted).headerFields[hostName], same)
        }
        // Spaces around a value are no part of it (they were trimmed before, and still are).
        var spaced = URLRequest(url: URL(string: "https://example.com/")!)
        spaced.setValue("Bearer x ", forHTTPHeaderField: "Authorization")
        XCTAssertEqual(try HTTPRequest(spaced).headerFields[.authorization], "Bearer x")
        XCTAssertTrue(URLRequest.namesSameAuthority("[::1]:8080", "[::1]:8080", scheme: "http"))
        XCTAssertFalse(URLRequest.namesSameAuthority("h:8080", "h", scheme: "http"))
        hosted.setValue("victim.test", forHTTPHeaderField: "Host")
        XCTAssertThrowsError(try HTTPRequest(hosted)) { XCTAssertEqual($0 as? HTTPTypesConversionError, .conflictingHostField("victim.test")) }
        var withHost = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/")
        withHost.headerFields[hostName] = "example.com"
        XCTAssertNil(try URLRequest(withHost).value(forHTTPHeaderField: "Host"))
        withHost.headerFields[hostName] = "victim.test"
        XCTAssertThrowsError(try URLRequest(withHost)) { XCTAssertEqual($0 as? HTTPTypesConversionError, .conflictingHostField("victim.test")) }
        XCTAssertThrowsError(try CurlewTransport.urlRequest(for: withHost, baseURL: URL(string: "http://h.test:8080/api")!)) {
            XCTAssertEqual($0 as? HTTPTypesConversionError, .conflictingHostField("victim.test"))
        }
        withHost.headerFields[hostName] = "h.test:8080"
        XCTAssertNil(try CurlewTransport.urlRequest(for: withHost, baseURL: URL(string: "http://h.test:8080/api")!).value(forHTTPHeaderField: "Host"))

        var urlRequest = URLRequest(url: URL(string: "https://[::1]:8443/a%20b?q=1")!)
        urlRequest.httpMethod = "PATCH"
        urlRequest.setValue("v", forHTTPHeaderField: "X-B")
        urlRequest.setValue("u", forHTTPHeaderField: "X-A")
        let request = try HTTPRequest(urlRequest)
        XCTAssertEqual(request.method, .patch)
        XCTAssertEqual(request.authority, "[::1]:8443")
        XCTAssertEqual(request.path, "/a%20b?q=1")
        XCTAssertEqual(request.headerFields.map(\.name.rawName), ["X-A", "X-B"])
        let back = try URLRequest(request)
        XCTAssertEqual(back.url?.absoluteString, "https://[::1]:8443/a%20b?q=1")
        XCTAssertEqual(back.httpMethod, "PATCH")

        XCTAssertThrowsError(try HTTPRequest(URLRequest(url: URL(string: "file:///etc/passwd")!))) {
            XCTAssertEqual($0 as? HTTPTypesConversionError, .missingURL)
        }
        var badMethod = URLRequest(url: URL(string: "http://example.com/")!)
        badMethod.httpMethod = "GET POST"
        XCTAssertThrowsError(try HTTPRequest(badMethod)) {
            XCTAssertEqual($0 as? HTTPTypesConversionError, .invalidMethod("GET POST"))
        }

        let head = HTTPResponseHead(
            url: URL(string: "http://example.com/")!, statusCode: 299, reasonPhrase: "Odd",
            fields: [("X-One", "1"), ("x-one", "2")])
        let response = HTTPResponse(head)
        XCTAssertEqual(response.status.code, 299)
        XCTAssertEqual(response.status.reasonPhrase, "Odd")
        XCTAssertEqual(response.headerFields[values: HTTPField.Name("X-One")!], ["1", "2"])
        let again = HTTPResponseHead(response, url: head.url)
        XCTAssertEqual(again.fields.map(\.value), ["1", "2"])

        // Foundation's response has a dictionary of fields: they come sorted by name, the same
        // every run (they came in the dictionary's order, which changes from run to run).
        let foundation = try XCTUnwrap(HTTPURLResponse(
            url: URL(string: "http://example.com/")!, statusCode: 200, httpVersion: "HTTP/1.1",
            headerFields: ["X-E": "5", "X-B": "2", "X-D": "4", "X-A": "1", "X-C": "3"]))
        XCTAssertEqual(HTTPResponse(foundation).headerFields.map(\.name.canonicalName), ["x-a", "x-b", "x-c", "x-d", "x-e"])
    }
}

/// Byte chunks as an async sequence that starts again at each iteration: a body of unknown
/// length that may be read more than once.
private struct ChunkList: AsyncSequence, Sendable {
    typealias Element = HTTPBody.ByteChunk
    let chunks: [HTTPBody.ByteChunk]

    struct AsyncIterator: AsyncIteratorProtocol {
        var remaining: ArraySlice<HTTPBody.ByteChunk>
        mutating func next() async throws -> HTTPBody.ByteChunk? { remaining.popFirst() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(remaining: chunks[...]) }
}

/// A body that gives three bytes, then waits until its reader's task is cancelled and ends
/// (as `AsyncStream` ends at a cancellation); `stalled` is set once it waits.
private struct StallingBody: AsyncSequence, Sendable {
    typealias Element = HTTPBody.ByteChunk
    let stalled: StallFlag

    struct AsyncIterator: AsyncIteratorProtocol {
        let stalled: StallFlag
        var gaveFirst = false
        mutating func next() async throws -> HTTPBody.ByteChunk? {
            if !gaveFirst {
                gaveFirst = true
                return ArraySlice("abc".utf8)
            }
            stalled.set()
            for _ in 0..<3000 where !Task.isCancelled { try? await Task.sleep(nanoseconds: 10_000_000) }
            return nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stalled: stalled) }
}

/// Set once by `StallingBody` when it starts to wait.
private final class StallFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}

/// A bearer token for the refresh test.
private struct BearerToken: AuthenticationCredential {
    let value: String
    var requiresRefresh: Bool { false }
}

/// Sends the token as `Authorization: Bearer …`; a refresh gives "fresh" and is counted.
private final class BearerAuthenticator: Authenticator {
    let refreshes = Mutex(0)

    func apply(_ credential: BearerToken, to request: inout URLRequest) {
        request.setValue("Bearer " + credential.value, forHTTPHeaderField: "Authorization")
    }

    func refresh(_ credential: BearerToken) async throws -> BearerToken {
        refreshes.withLock { $0 += 1 }
        return BearerToken(value: "fresh")
    }
}
