import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The HTTP response cache against the in-process test server: freshness, revalidation,
/// Vary, the request's cache policy, invalidation, limits and the disk store.
final class ResponseCacheTests: XCTestCase {
    var server: TestServer!
    var directory: URL!

    override func setUp() async throws {
        server = try TestServer()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-cache-\(UUID().uuidString)")
    }

    override func tearDown() async throws {
        server.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }

    private func manager(_ cache: ResponseCache) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.responseCache = cache
        return URLSessionManager.raw(configuration)
    }

    private func get(
        _ manager: URLSessionManager, _ path: String, policy: URLRequest.CachePolicy = .useProtocolCachePolicy,
        headers: [String: String] = [:]
    ) async throws -> DataResponse {
        var request = URLRequest(url: try server.url(path))
        request.cachePolicy = policy
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return await manager.response(for: request)
    }

    private func text(_ response: DataResponse) -> String? { response.data.map { String(decoding: $0, as: UTF8.self) } }

    /// A route answering `body` with `headers`, counting its requests.
    private func route(_ path: String, headers: [(name: String, value: String)], body: String) {
        server.route(path, response: TestResponse(status: 200, headers: headers, body: Data(body.utf8)))
    }

    /// The cache meets the decompression guard's judgement at a chunked body's end: a bomb that
    /// came whole in one read (4 MiB of zeros, 4 KB gzip'd, chunked, `max-age=600`) is refused
    /// only when the body ends, after every byte was read; nothing of it is stored.
    func testAChunkedBombRefusedAtItsEndIsNotStored() async throws {
        var bomb = TestResponse(
            status: 200, headers: [("Content-Encoding", "gzip"), ("Cache-Control", "max-age=600")],
            body: try FaultBodyLimitTests.gzippedZeros(megabytes: 4))
        bomb.framing = .chunked
        server.route("/bomb", response: bomb)
        let manager = manager(ResponseCache(memoryCapacity: 128 << 20))  // entries up to 6.4 MiB
        let refused = try await get(manager, "/bomb")
        XCTAssertEqual(refused.error as? SessionError, .decompressionLimitExceeded(ratio: 100))
        let offline = try await get(manager, "/bomb", policy: .returnCacheDataDontLoad)
        XCTAssertEqual(offline.error as? SessionError, .resourceNotCached, "the refused body was stored: \(offline.result)")
    }

    /// A `Range` request goes past the cache: it was answered the stored whole body as a 200
    /// (the caller asked for 4 bytes), and its 206 evicted the stored entry.
    func testARangeRequestGoesPastTheCacheAndLeavesItsEntry() async throws {
        server.route("/ranged") { request in
            if request.header("Range") == "bytes=0-3" {
                return TestResponse(status: 206, headers: [("Content-Range", "bytes 0-3/10"), ("Cache-Control", "max-age=600")], body: Data("0123".utf8))
            }
            return TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data("0123456789".utf8))
        }
        let manager = manager(ResponseCache())
        let stored = try await get(manager, "/ranged")
        XCTAssertEqual(text(stored), "0123456789")
        let part = try await get(manager, "/ranged", headers: ["Range": "bytes=0-3"])
        XCTAssertEqual(part.response?.statusCode, 206, "the stored whole body answered a range request")
        XCTAssertEqual(text(part), "0123")
        XCTAssertEqual(server.requests.count, 2)
        let whole = try await get(manager, "/ranged", policy: .returnCacheDataDontLoad)
        XCTAssertEqual(text(whole), "0123456789", "the 206 evicted the stored entry: \(whole.result)")
        XCTAssertEqual(server.requests.count, 2)
    }

    /// A server error is no new representation: the stored answer stays for an offline
    /// fallback (a 503 to a reload evicted it); a 304 that says `no-store` takes it out.
    func testAServerErrorKeepsTheStoredAnswerAndANoStore304RemovesIt() async throws {
        let answers = Mutex(0)
        server.route("/outage") { _ in
            let count = answers.withLock { count -> Int in
                count += 1
                return count
            }
            return count == 1
                ? TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data("v1".utf8))
                : TestResponse(status: 503, headers: [], body: Data("down".utf8))
        }
        let manager = manager(ResponseCache())
        let first = try await get(manager, "/outage")
        XCTAssertEqual(text(first), "v1")
        let outage = try await get(manager, "/outage", policy: .reloadIgnoringLocalCacheData)
        XCTAssertEqual(outage.response?.statusCode, 503)
        let offline = try await get(manager, "/outage", policy: .returnCacheDataDontLoad)
        XCTAssertEqual(text(offline), "v1", "the outage evicted the stored answer: \(offline.result)")

        server.route("/revoked") { request in
            if request.header("If-None-Match") == "\"a\"" {
                return TestResponse(status: 304, headers: [("ETag", "\"a\""), ("Cache-Control", "no-store")], body: Data())
            }
            return TestResponse(status: 200, headers: [("ETag", "\"a\""), ("Cache-Control", "max-age=0")], body: Data("secret".utf8))
        }
        let original = try await get(manager, "/revoked")
        XCTAssertEqual(text(original), "secret")
        let revalidated = try await get(manager, "/revoked")
        XCTAssertEqual(text(revalidated), "secret", "revalidated: 304")
        let after = try await get(manager, "/revoked", policy: .returnCacheDataDontLoad)
        XCTAssertEqual(after.error as? SessionError, .resourceNotCached, "the no-store 304 left the entry: \(after.result)")
    }

    func testAFreshResponseIsAnsweredWithoutTheNetwork() async throws {
        route("/fresh", headers: [("Cache-Control", "max-age=600")], body: "v1")
        let manager = manager(ResponseCache())
        let first = try await get(manager, "/fresh")
        let second = try await get(manager, "/fresh")
        XCTAssertEqual(text(first), "v1")
        XCTAssertEqual(text(second), "v1")
        XCTAssertEqual(second.response?.statusCode, 200)
        XCTAssertNotNil(first.metrics)
        XCTAssertNil(second.metrics, "answered from the cache")
        XCTAssertEqual(server.requests.count, 1)
    }

    /// An answer from the cache meets the data task's hooks as one from the network does: the
    /// response hook's `.cancel` ends the task cancelled, its `.becomeDownload` puts the stored
    /// body in a file, and the data hook is given the body. Neither hook was asked: a `.cancel`
    /// was passed by and the task succeeded.
    func testAnAnswerFromTheCacheMeetsTheDataTaskHooks() async throws {
        route("/fresh", headers: [("Cache-Control", "max-age=600")], body: "v1")
        let manager = manager(ResponseCache())
        let stored = try await get(manager, "/fresh")
        XCTAssertEqual(text(stored), "v1")
        let chunks = Mutex<[String]>([])
        manager.setDataTaskDidReceiveDataBlock { _, data in chunks.withLock { $0.append(String(decoding: data, as: UTF8.self)) } }
        let disposition = Mutex(ResponseDisposition.cancel)
        manager.setDataTaskDidReceiveResponseBlock { _, _ in disposition.withLock { $0 } }
        let url = try server.url("/fresh")
        func run() async -> DataResponse {
            await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
                manager.dataTask(with: URLRequest(url: url)) { continuation.resume(returning: $0) }.resume()
            }
        }
        let cancelledTask = Mutex<SessionTask?>(nil)
        let cancelled = await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
            let task = manager.dataTask(with: URLRequest(url: url)) { continuation.resume(returning: $0) }
            cancelledTask.withLock { $0 = task }
            task.resume()
        }
        XCTAssertEqual(cancelled.error as? SessionError, .cancelled, "the hook's .cancel")
        XCTAssertEqual(cancelledTask.withLock { $0 }?.countOfBytesReceived, 0, "cancelled at the head: no body taken")
        XCTAssertEqual(chunks.withLock { $0 }, [])

        disposition.withLock { $0 = .allow }
        let allowed = await run()
        XCTAssertEqual(text(allowed), "v1")
        XCTAssertEqual(chunks.withLock { $0 }, ["v1"], "the data hook is given the stored body")

        disposition.withLock { $0 = .becomeDownload }
        let fileContents = Mutex<Data?>(nil)
        let downloaded = await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
            manager.dataTask(with: URLRequest(url: url)) { response in
                fileContents.withLock { $0 = response.fileURL.flatMap { try? Data(contentsOf: $0) } }
                continuation.resume(returning: response)
            }.resume()
        }
        XCTAssertNil(downloaded.error)
        XCTAssertEqual(fileContents.withLock { $0 }, Data("v1".utf8), "the file holds the stored body")
        XCTAssertNil(downloaded.data)
        XCTAssertEqual(server.requests.count, 1, "every answer came from the cache")
    }

    /// A gzipped answer is stored decoded: answered from the cache, the task's counts are the
    /// stored body's, not the encoded size its `Content-Length` still names.
    func testAnAnswerStoredDecodedCountsItsBodyWhenItAnswersAgain() async throws {
        let gzipped = try FaultBodyLimitTests.gzippedZeros(megabytes: 1)
        server.route("/coded", response: TestResponse(
            status: 200, headers: [("Cache-Control", "max-age=600"), ("Content-Encoding", "gzip")], body: gzipped))
        let manager = manager(ResponseCache(memoryCapacity: 64 << 20))  // entries up to 3.2 MiB
        let first = try await get(manager, "/coded")
        XCTAssertEqual(first.data?.count, 1 << 20)
        let done = expectation(description: "answered")
        let task = manager.dataTask(with: URLRequest(url: try server.url("/coded"))) { _ in done.fulfill() }
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        XCTAssertEqual(server.requests.count, 1, "answered from the cache")
        XCTAssertEqual(task.countOfBytesReceived, 1 << 20)
        XCTAssertEqual(task.countOfBytesExpectedToReceive, 1 << 20)
        let progress = try XCTUnwrap(manager.downloadProgress(for: task))
        XCTAssertEqual(progress.totalUnitCount, 1 << 20)
        XCTAssertEqual(progress.fractionCompleted, 1)
    }

    func testAStaleResponseIsRevalidatedAndA304GivesTheStoredBody() async throws {
        let tag = Mutex("\"a\"")
        let body = Mutex("first")
        server.route("/validated") { request in
            let current = tag.withLock { $0 }
            let sent = request.headers.first { $0.name.lowercased() == "if-none-match" }?.value
            if sent == current {
                return TestResponse(status: 304, headers: [("ETag", current), ("X-Refreshed", "yes")], body: Data())
            }
            return TestResponse(
                status: 200, headers: [("ETag", current), ("Cache-Control", "no-cache")],
                body: Data(body.withLock { $0 }.utf8))
        }
        let manager = manager(ResponseCache())
        _ = try await get(manager, "/validated")
        let revalidated = try await get(manager, "/validated")
        XCTAssertEqual(revalidated.response?.statusCode, 200, "the stored status, not the 304")
        XCTAssertEqual(text(revalidated), "first")
        XCTAssertEqual(revalidated.response?.value(forHTTPHeaderField: "X-Refreshed"), "yes", "the 304's fields apply")
        XCTAssertEqual(server.requests.last?.headers.first { $0.name.lowercased() == "if-none-match" }?.value, "\"a\"")

        tag.withLock { $0 = "\"b\"" }
        body.withLock { $0 = "second" }
        let changed = try await get(manager, "/validated")
        XCTAssertEqual(text(changed), "second")
        let again = try await get(manager, "/validated")
        XCTAssertEqual(text(again), "second", "the new response replaced the entry")
        XCTAssertEqual(server.requests.count, 4)
    }

    /// The response hook meets a revalidation: the hook is shown the stored response the 304
    /// stands for, and when it sends the body to a file (`.becomeDownload`) the file holds the
    /// stored body. Until 2026-11-28 the hook saw the 304 and the handler got an empty file
    /// labelled 200.
    func testARevalidationTheResponseHookSendsToAFileGivesTheStoredBody() async throws {
        let stored = String(repeating: "stored body ", count: 1_000)
        server.route("/validated") { request in
            if request.header("If-None-Match") == "\"a\"" {
                return TestResponse(status: 304, headers: [("ETag", "\"a\"")], body: Data())
            }
            return TestResponse(
                status: 200, headers: [("ETag", "\"a\""), ("Cache-Control", "no-cache")], body: Data(stored.utf8))
        }
        let manager = manager(ResponseCache())
        let first = try await get(manager, "/validated")
        XCTAssertEqual(text(first), stored)

        let shown = Mutex<[Int]>([])
        manager.setDataTaskDidReceiveResponseBlock { _, response in
            shown.withLock { $0.append(response.statusCode) }
            return .becomeDownload
        }
        let seen = Mutex<(status: Int?, file: Data?, data: Data?)>((nil, nil, nil))
        let response = await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
            manager.dataTask(with: URLRequest(url: try! server.url("/validated"))) { response in
                seen.withLock { $0 = (response.response?.statusCode, response.fileURL.flatMap { try? Data(contentsOf: $0) }, response.data) }
                continuation.resume(returning: response)
            }.resume()
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(server.requests.last?.header("If-None-Match"), "\"a\"", "it was revalidated")
        XCTAssertEqual(shown.withLock { $0 }, [200], "the hook sees the stored response, not the 304")
        XCTAssertEqual(seen.withLock { $0.status }, 200)
        XCTAssertEqual(seen.withLock { $0.file }?.count, stored.utf8.count, "the file holds the stored body")
        XCTAssertTrue(seen.withLock { $0.file } == Data(stored.utf8), "the file holds the stored body")
        XCTAssertNil(seen.withLock { $0.data }, "the body went to the file, not to memory")
    }

    /// A caller's own conditional request meets a fresh entry: answered as the server would
    /// (RFC 9111 §4.3.2), without asking it. Until 2026-11-28 a caller whose copy was current
    /// got the whole stored 200 instead of its 304.
    func testACallersConditionalRequestIsAnsweredByAFreshEntryAsTheServerWould() async throws {
        route(
            "/fresh",
            headers: [("Cache-Control", "max-age=600"), ("ETag", "W/\"a\""), ("Last-Modified", "Tue, 24 Nov 2026 10:00:00 GMT"),
                      ("Content-Type", "text/plain")],
            body: "stored")
        let manager = manager(ResponseCache())
        _ = try await get(manager, "/fresh")
        XCTAssertEqual(server.requests.count, 1)

        let current = try await get(manager, "/fresh", headers: ["If-None-Match": "\"x\", \"a\""])
        XCTAssertEqual(current.response?.statusCode, 304, "the caller's copy is current")
        XCTAssertEqual(current.data ?? Data(), Data())
        XCTAssertEqual(current.response?.value(forHTTPHeaderField: "ETag"), "W/\"a\"")
        XCTAssertNil(current.response?.value(forHTTPHeaderField: "Content-Type"), "no field of a body")
        let any = try await get(manager, "/fresh", headers: ["If-None-Match": "*"])
        XCTAssertEqual(any.response?.statusCode, 304)
        let other = try await get(manager, "/fresh", headers: ["If-None-Match": "\"b\""])
        XCTAssertEqual(other.response?.statusCode, 200, "another copy gets the stored response")
        XCTAssertEqual(text(other), "stored")
        let since = try await get(manager, "/fresh", headers: ["If-Modified-Since": "Wed, 25 Nov 2026 10:00:00 GMT"])
        XCTAssertEqual(since.response?.statusCode, 304, "not modified since a later date")
        let before = try await get(manager, "/fresh", headers: ["If-Modified-Since": "Mon, 23 Nov 2026 10:00:00 GMT"])
        XCTAssertEqual(before.response?.statusCode, 200, "modified since an earlier date")
        XCTAssertEqual(text(before), "stored")
        let both = try await get(
            manager, "/fresh", headers: ["If-None-Match": "\"b\"", "If-Modified-Since": "Wed, 25 Nov 2026 10:00:00 GMT"])
        XCTAssertEqual(both.response?.statusCode, 200, "If-None-Match decides when both are sent")
        let future = try await get(manager, "/fresh", headers: ["If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"])
        XCTAssertEqual(future.response?.statusCode, 200, "a date later than now is no condition")
        XCTAssertEqual(server.requests.count, 1, "every answer came from the fresh entry")

        // Preconditions apply only to a 2xx: a stored 404 answers as itself.
        server.route("/missing", response: TestResponse(status: 404, headers: [("Cache-Control", "max-age=600")], body: Data("no".utf8)))
        _ = try await get(manager, "/missing")
        let missing = try await get(manager, "/missing", headers: ["If-None-Match": "*"])
        XCTAssertEqual(missing.response?.statusCode, 404)
        XCTAssertEqual(server.requests.count, 2, "the 404 came from the cache")
    }

    func testVaryKeepsDifferentRequestsApart() async throws {
        server.route("/vary") { request in
            let language = request.headers.first { $0.name.lowercased() == "accept-language" }?.value ?? "none"
            return TestResponse(
                status: 200, headers: [("Cache-Control", "max-age=600"), ("Vary", "Accept-Language")],
                body: Data(language.utf8))
        }
        let manager = manager(ResponseCache())
        let english = try await get(manager, "/vary", headers: ["Accept-Language": "en"])
        let englishAgain = try await get(manager, "/vary", headers: ["Accept-Language": "en"])
        let french = try await get(manager, "/vary", headers: ["Accept-Language": "fr"])
        XCTAssertEqual(text(english), "en")
        XCTAssertEqual(text(englishAgain), "en")
        XCTAssertEqual(text(french), "fr", "a different Accept-Language is not answered with the English entry")
        XCTAssertEqual(server.requests.count, 2)
    }

    func testACallers304IsItsAnswerAndFreshensTheEntry() async throws {
        server.route("/own") { request in
            if request.headers.contains(where: { $0.name.lowercased() == "if-none-match" }) {
                return TestResponse(status: 304, headers: [("ETag", "\"x\""), ("Cache-Control", "max-age=600")], body: Data())
            }
            return TestResponse(status: 200, headers: [("ETag", "\"x\""), ("Cache-Control", "max-age=0")], body: Data("body".utf8))
        }
        let manager = manager(ResponseCache())
        _ = try await get(manager, "/own")
        let own = try await get(manager, "/own", headers: ["If-None-Match": "\"x\""])
        XCTAssertEqual(own.response?.statusCode, 304, "the caller validated: the 304 is its answer")
        let plain = try await get(manager, "/own")
        XCTAssertEqual(plain.response?.statusCode, 200)
        XCTAssertEqual(text(plain), "body", "the entry was freshened, never replaced by the 304")
        XCTAssertEqual(server.requests.count, 2)
    }

    func testVaryCookieIsNeverAnsweredFromTheCache() async throws {
        route("/per-user", headers: [("Cache-Control", "max-age=600"), ("Vary", "Cookie")], body: "mine")
        let manager = manager(ResponseCache())
        _ = try await get(manager, "/per-user")
        _ = try await get(manager, "/per-user")
        XCTAssertEqual(server.requests.count, 2, "the jar's cookies change under the cache")
    }

    func testNoStoreAndVaryStarAreNeverStored() async throws {
        route("/nostore", headers: [("Cache-Control", "no-store, max-age=600")], body: "x")
        route("/star", headers: [("Cache-Control", "max-age=600"), ("Vary", "*")], body: "y")
        let manager = manager(ResponseCache())
        for path in ["/nostore", "/nostore", "/star", "/star"] { _ = try await get(manager, path) }
        XCTAssertEqual(server.requests.count, 4)
    }

    func testTheRequestsCachePolicyDecidesFirst() async throws {
        route("/policy", headers: [("Cache-Control", "max-age=0"), ("ETag", "\"p\"")], body: "stale")
        let manager = manager(ResponseCache())
        let miss = try await get(manager, "/policy", policy: .returnCacheDataDontLoad)
        XCTAssertEqual(miss.error as? SessionError, .resourceNotCached)
        XCTAssertEqual(server.requests.count, 0, "cache-only never touches the network")

        _ = try await get(manager, "/policy")
        let elseLoad = try await get(manager, "/policy", policy: .returnCacheDataElseLoad)
        XCTAssertEqual(text(elseLoad), "stale", "any entry, however stale")
        let dontLoad = try await get(manager, "/policy", policy: .returnCacheDataDontLoad)
        XCTAssertEqual(text(dontLoad), "stale")
        XCTAssertEqual(server.requests.count, 1)

        _ = try await get(manager, "/policy", policy: .reloadIgnoringLocalCacheData)
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertNil(server.requests.last?.headers.first { $0.name.lowercased() == "if-none-match" }, "a plain reload")
        _ = try await get(manager, "/policy", headers: ["Cache-Control": "only-if-cached"])
        XCTAssertEqual(server.requests.count, 2)
    }

    func testExpiresAndHeuristicFreshness() async throws {
        let now = Date()
        route("/expired", headers: [("Date", HTTPDate.format(now)), ("Expires", HTTPDate.format(now - 60))], body: "e")
        route("/invalid-expires", headers: [("Expires", "0")], body: "i")
        route("/heuristic", headers: [("Date", HTTPDate.format(now)), ("Last-Modified", HTTPDate.format(now - 86_400))], body: "h")
        let manager = manager(ResponseCache())
        for path in ["/expired", "/expired", "/invalid-expires", "/invalid-expires", "/heuristic", "/heuristic"] {
            _ = try await get(manager, path)
        }
        let paths = server.requests.map(\.path)
        XCTAssertEqual(paths.filter { $0 == "/expired" }.count, 2)
        XCTAssertEqual(paths.filter { $0 == "/invalid-expires" }.count, 2)
        XCTAssertEqual(paths.filter { $0 == "/heuristic" }.count, 1, "10% of a day old: fresh for 2.4 hours")
    }

    /// A chunked answer whose first chunk comes at once and the rest after 30 s (a stream the
    /// test leaves or times out).
    static let firstChunkThenStall: TestResponse = {
        var slow = TestResponse(status: 200)
        slow.body = .stream([TestResponse.Chunk(Data("first".utf8)), TestResponse.Chunk(Data("rest".utf8), delay: .seconds(30))])
        slow.framing = .chunked
        return slow
    }()

    /// A POST of one byte to `/resource`.
    private func postToResource() throws -> URLRequest {
        var post = URLRequest(url: try server.url("/resource"))
        post.httpMethod = "POST"
        post.httpBody = Data("x".utf8)
        return post
    }

    func testASuccessfulPostRemovesTheEntry() async throws {
        route("/resource", headers: [("Cache-Control", "max-age=600")], body: "r")
        server.route("/resource", method: "POST", response: .text("posted"))
        let manager = manager(ResponseCache())
        _ = try await get(manager, "/resource")
        var post = URLRequest(url: try server.url("/resource"))
        post.httpMethod = "POST"
        post.httpBody = Data("x".utf8)
        _ = await manager.response(for: post)
        _ = try await get(manager, "/resource")
        XCTAssertEqual(server.requests.filter { $0.method == "GET" }.count, 2)
    }

    /// An unsafe request whose answer's body does not arrive whole still changed the
    /// resource (RFC 9111 §4.4 asks for a non-error status only): a streamed POST the consumer
    /// leaves after the first chunk, and a POST whose body stops until its timeout. The GET
    /// sent right after either goes to the server.
    func testAnUnsafeRequestWhoseBodyIsCutStillRemovesTheEntry() async throws {
        route("/resource", headers: [("Cache-Control", "max-age=600")], body: "r")
        let slow = Self.firstChunkThenStall
        server.route("/resource", method: "POST", response: slow)
        let manager = manager(ResponseCache())
        _ = try await get(manager, "/resource")
        var post = try postToResource()

        let (bytes, head) = try await manager.bytes(for: post)
        XCTAssertEqual(head.statusCode, 200)
        for try await chunk in bytes {
            XCTAssertEqual(chunk, Data("first".utf8))
            break  // the consumer leaves: the task ends cancelled
        }
        _ = try await get(manager, "/resource")
        XCTAssertEqual(server.requests.filter { $0.method == "GET" }.count, 2, "the streamed POST left the entry")

        _ = try await get(manager, "/resource")  // stored again
        post.timeoutInterval = 1
        let timedOut = await manager.response(for: post)
        XCTAssertEqual(timedOut.response?.statusCode, 200)
        XCTAssertNotNil(timedOut.error)
        _ = try await get(manager, "/resource")
        XCTAssertEqual(server.requests.filter { $0.method == "GET" }.count, 3, "the POST cut by its timeout left the entry")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A streamed POST that a 303 sent on as a GET changed the resource as much: the entry goes
    /// at the head, so a GET sent while the stream still runs goes to the server (it was checked
    /// against the last hop's method, GET, and left until the stream ended).
    func testAStreamedPostRedirectedToAGetRemovesTheEntryAtTheHead() async throws {
        route("/resource", headers: [("Cache-Control", "max-age=600")], body: "r")
        server.route("/resource", method: "POST", response: TestResponse(status: 303, headers: [("Location", "/after")]))
        let slow = Self.firstChunkThenStall
        server.route("/after", response: slow)
        let manager = manager(ResponseCache())
        _ = try await get(manager, "/resource")
        let post = try postToResource()

        let (bytes, head) = try await manager.bytes(for: post)
        XCTAssertEqual(head.url?.path, "/after")
        _ = try await get(manager, "/resource")  // the stream still runs
        XCTAssertEqual(server.requests.filter { $0.path == "/resource" && $0.method == "GET" }.count, 2)
        bytes.task?.cancel()
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testEntriesSurviveOnDiskAndATornFileIsAMiss() async throws {
        route("/disk", headers: [("Cache-Control", "max-age=600")], body: String(repeating: "d", count: 10_000))
        _ = try await get(manager(ResponseCache(directory: directory)), "/disk")
        try await eventually({ (try? FileManager.default.contentsOfDirectory(atPath: self.directory.path).count) == 1 }, "stored")

        let reopened = ResponseCache(directory: directory)
        XCTAssertGreaterThan(reopened.currentDiskUsage, 10_000)
        let fromDisk = try await get(manager(reopened), "/disk")
        XCTAssertEqual(fromDisk.data?.count, 10_000)
        XCTAssertEqual(server.requests.count, 1, "a new cache on the same directory answered")

        // A torn write: the file cut short. It is a miss, never a short body.
        let file = try XCTUnwrap(try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil).first)
        let bytes = try Data(contentsOf: file)
        try bytes.prefix(bytes.count - 100).write(to: file)
        let torn = try await get(manager(ResponseCache(directory: directory)), "/disk")
        XCTAssertEqual(torn.data?.count, 10_000)
        XCTAssertEqual(server.requests.count, 2)
    }

    func testLimitsEvictAndRefuseLargeEntries() async throws {
        for index in 0..<4 {
            route("/item\(index)", headers: [("Cache-Control", "max-age=600")], body: String(repeating: "x", count: 30_000))
        }
        route("/huge", headers: [("Cache-Control", "max-age=600")], body: String(repeating: "h", count: 200_000))
        let cache = ResponseCache(memoryCapacity: 100_000, diskCapacity: 0)
        let manager = manager(cache)
        for index in 0..<4 { _ = try await get(manager, "/item\(index)") }
        XCTAssertLessThanOrEqual(cache.currentMemoryUsage, 100_000)
        _ = try await get(manager, "/item3")  // the newest is kept
        _ = try await get(manager, "/item0")  // the oldest was evicted
        XCTAssertEqual(server.requests.filter { $0.path == "/item3" }.count, 1)
        XCTAssertEqual(server.requests.filter { $0.path == "/item0" }.count, 2)
        _ = try await get(manager, "/huge")
        _ = try await get(manager, "/huge")
        XCTAssertEqual(server.requests.filter { $0.path == "/huge" }.count, 2, "larger than maximumEntrySize")
    }

    // MARK: - Rules on their own

    func testHTTPDatesInEveryForm() throws {
        let expected = Date(timeIntervalSince1970: 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), expected)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), expected)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), expected)
        XCTAssertEqual(HTTPDate.format(expected), "Sun, 06 Nov 1994 08:49:37 GMT")
        for invalid in ["0", "", "-1", "Sun, 32 Nov 1994 08:49:37 GMT", "tomorrow", "Sun, 06 Nov 1994 25:00:00 GMT"] {
            XCTAssertNil(HTTPDate.parse(invalid), invalid)
        }
    }

    /// A freshness directive given twice with different values (two `Cache-Control` fields,
    /// joined) makes the response stale (RFC 9111 §4.2.1); the last one made it fresh.
    func testAFreshnessDirectiveGivenTwiceDifferentlyIsStale() {
        XCTAssertEqual(CacheFreshness.directives("max-age=0, max-age=86400")["max-age"], "0")
        XCTAssertEqual(CacheFreshness.directives("s-maxage=60, public, s-maxage=600")["s-maxage"], "0")
        XCTAssertEqual(CacheFreshness.directives("max-age=60, max-age=\"60\"")["max-age"], "60")
        XCTAssertEqual(CacheFreshness.directives("private=\"a\", private=\"b\"")["private"], "a", "the first value")
    }

    func testAgeCountsTheAgeHeaderAndResidentTime() {
        let stored = Date(timeIntervalSince1970: 1_000_000)
        let entry = CachedResponse(
            url: URL(fileURLWithPath: "/"), statusCode: 200, httpVersion: "HTTP/1.1",
            fields: [.init(name: "Cache-Control", value: "max-age=100"), .init(name: "Age", value: "30"),
                     .init(name: "Date", value: HTTPDate.format(stored))],
            body: Data(), requestDate: stored - 2, responseDate: stored, varyingRequestFields: [:])
        XCTAssertEqual(CacheFreshness.age(of: entry, now: stored + 10), 42)  // 30 + 2 s round trip + 10 s stored
        XCTAssertEqual(CacheFreshness.decide(entry: entry, policy: .useProtocolCachePolicy, requestDirectives: [:],
                                             pragmaNoCache: false, now: stored + 10), .useCached)
        XCTAssertEqual(CacheFreshness.decide(entry: entry, policy: .useProtocolCachePolicy, requestDirectives: [:],
                                             pragmaNoCache: false, now: stored + 70), .fetch, "stale, no validator")
        XCTAssertEqual(CacheFreshness.decide(entry: entry, policy: .useProtocolCachePolicy, requestDirectives: ["max-age": "20"],
                                             pragmaNoCache: false, now: stored + 10), .fetch)
        XCTAssertEqual(CacheFreshness.decide(entry: entry, policy: .useProtocolCachePolicy, requestDirectives: [:],
                                             pragmaNoCache: true, now: stored + 10), .fetch)
        XCTAssertEqual(CacheFreshness.seconds("99999999999999999999999"), 1e23, "huge, not an overflow")
        XCTAssertNil(CacheFreshness.seconds("-5"))
    }
}
