import CurlewTestSupport
import Foundation
import Synchronization
import Serialization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Whose answer the response cache gives: an entry is reused only for the identity (the
/// `Authorization` and `Cookie` sent) it answered; a cache several managers use follows RFC
/// 9111's shared-cache rules; a reset drops the manager's private entries; a 304 updates
/// only the entry whose validators the request carried.
final class ResponseCacheIdentityTests: XCTestCase {
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

    private func manager(_ cache: ResponseCache, jar: CookieJar? = nil) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.responseCache = cache
        configuration.cookieJar = jar
        return URLSessionManager.raw(configuration)
    }

    private func get(
        _ manager: URLSessionManager, _ path: String, headers: [String: String] = [:]
    ) async throws -> DataResponse {
        var request = URLRequest(url: try server.url(path))
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return await manager.response(for: request)
    }

    private func text(_ response: DataResponse) -> String? { response.data.map { String(decoding: $0, as: UTF8.self) } }

    private static func header(_ request: TestRequest, _ name: String) -> String? {
        request.headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// A route answering with the request's Authorization (else its Cookie, else
    /// "anonymous") under `cacheControl`.
    private func echoRoute(_ path: String, cacheControl: String, extra: [(name: String, value: String)] = []) {
        server.route(path) { request in
            let who = Self.header(request, "Authorization") ?? Self.header(request, "Cookie") ?? "anonymous"
            return TestResponse(status: 200, headers: [("Cache-Control", cacheControl)] + extra, body: Data(who.utf8))
        }
    }

    private func reset(_ manager: URLSessionManager) async {
        let invalidated = expectation(forNotification: .sessionDidInvalidate, object: manager)
        manager.invalidateSessionCancelingTasks(true, resetSession: true)
        await fulfillment(of: [invalidated], timeout: 30)
    }

    // MARK: - Item 1: one identity is never answered with another's response

    /// A cache one manager uses alone is its private cache: private responses are kept, but
    /// only for the identity they answered.
    func testAPrivateResponseIsAnsweredOnlyToTheSameAuthorization() async throws {
        echoRoute("/me", cacheControl: "private, max-age=60")
        let manager = manager(ResponseCache())
        let alice = try await get(manager, "/me", headers: ["Authorization": "Bearer alice"])
        let aliceAgain = try await get(manager, "/me", headers: ["Authorization": "Bearer alice"])
        let bob = try await get(manager, "/me", headers: ["Authorization": "Bearer bob"])
        let bobAgain = try await get(manager, "/me", headers: ["Authorization": "Bearer bob"])
        let anonymous = try await get(manager, "/me")
        XCTAssertEqual(text(alice), "Bearer alice")
        XCTAssertEqual(text(aliceAgain), "Bearer alice")
        XCTAssertNil(aliceAgain.metrics, "the manager's private cache answered Alice again")
        XCTAssertEqual(text(bob), "Bearer bob", "Bob never gets Alice's response")
        XCTAssertNotNil(bob.metrics)
        XCTAssertEqual(text(bobAgain), "Bearer bob")
        XCTAssertEqual(text(anonymous), "anonymous")
        XCTAssertEqual(server.requests.count, 3)
    }

    /// The same through httpbin's `/response-headers` (a real peer): Bob's request goes to the
    /// network even though Alice's private response is fresh in the cache.
    func testHttpbinPrivateResponseIsNotReusedForAnotherUser() async throws {
        let manager = manager(ResponseCache())
        var request = URLRequest(url: try Peer.url("/response-headers?Cache-Control=private,%20max-age=60"))
        request.setValue("Bearer alice", forHTTPHeaderField: "Authorization")
        let alice = await manager.response(for: request)
        XCTAssertEqual(alice.response?.statusCode, 200)
        let aliceAgain = await manager.response(for: request)
        XCTAssertNil(aliceAgain.metrics, "fresh for Alice")
        request.setValue("Bearer bob", forHTTPHeaderField: "Authorization")
        let bob = await manager.response(for: request)
        XCTAssertEqual(bob.response?.statusCode, 200)
        XCTAssertNotNil(bob.metrics, "Bob's answer came from the network, not from Alice's entry")
    }

    /// Stale private entry of Alice's, validator "a": Bob's request is not turned into a
    /// revalidation of it, so a 304 can never hand him Alice's body.
    func testA304ForAnotherUserNeverDeliversTheStoredBody() async throws {
        server.route("/doc") { request in
            if Self.header(request, "If-None-Match") == "\"a\"" {
                return TestResponse(status: 304, headers: [("ETag", "\"a\"")], body: Data())
            }
            let who = Self.header(request, "Authorization") ?? "anonymous"
            return TestResponse(status: 200, headers: [("ETag", "\"a\""), ("Cache-Control", "private, no-cache")], body: Data(who.utf8))
        }
        let manager = manager(ResponseCache())
        _ = try await get(manager, "/doc", headers: ["Authorization": "Bearer alice"])
        let bob = try await get(manager, "/doc", headers: ["Authorization": "Bearer bob"])
        XCTAssertEqual(text(bob), "Bearer bob")
        XCTAssertNil(server.requests.last.flatMap { Self.header($0, "If-None-Match") }, "Bob's request was not a revalidation of Alice's entry")
        let alice = try await get(manager, "/doc", headers: ["Authorization": "Bearer bob"])
        XCTAssertEqual(text(alice), "Bearer bob", "Bob's own entry is revalidated for Bob")
        XCTAssertEqual(server.requests.last.flatMap { Self.header($0, "If-None-Match") }, "\"a\"")
    }

    /// A cache two managers use is a shared cache: responses to authorized requests are kept
    /// only when `public`, `s-maxage` or `must-revalidate` allows, `private` ones never, and a
    /// shared entry still answers only the identity it was stored for.
    func testASharedCacheFollowsRFC9111ForAuthorizedAndPrivateResponses() async throws {
        echoRoute("/plain", cacheControl: "max-age=60")
        echoRoute("/public", cacheControl: "public, max-age=60")
        echoRoute("/shared-age", cacheControl: "s-maxage=60")
        echoRoute("/private", cacheControl: "private, max-age=60")
        let cache = ResponseCache()
        let first = manager(cache)
        let second = manager(cache)
        let alice = ["Authorization": "Bearer alice"]
        for path in ["/plain", "/plain", "/public", "/shared-age", "/private", "/private"] {
            _ = try await get(first, path, headers: path == "/private" ? [:] : alice)
        }
        let publicForAlice = try await get(second, "/public", headers: alice)
        XCTAssertNil(publicForAlice.metrics, "a public response is shared between managers, for the same identity")
        let sharedAge = try await get(second, "/shared-age", headers: alice)
        XCTAssertNil(sharedAge.metrics, "s-maxage lets a shared cache keep it, and sets its freshness")
        let publicForBob = try await get(second, "/public", headers: ["Authorization": "Bearer bob"])
        XCTAssertEqual(text(publicForBob), "Bearer bob")
        let count = { (path: String) in self.server.requests.filter { $0.path == path }.count }
        XCTAssertEqual(count("/plain"), 2, "an authorized response without public is not stored by a shared cache")
        XCTAssertEqual(count("/private"), 2, "a shared cache never stores a private response")
        XCTAssertEqual(count("/public"), 2)
        XCTAssertEqual(count("/shared-age"), 1)
        withExtendedLifetime((first, second)) {}  // both use the cache throughout
    }

    /// The logout path: after a reset the previous user's private responses are gone, even
    /// when nothing in the request identifies the user (a response private to the session).
    func testAResetDropsThePreviousUsersPrivateResponses() async throws {
        let served = Mutex(0)
        server.route("/session") { _ in
            let number = served.withLock { count -> Int in
                count += 1
                return count
            }
            return TestResponse(status: 200, headers: [("Cache-Control", "private, max-age=600")], body: Data("user \(number)".utf8))
        }
        let manager = manager(ResponseCache())
        let before = try await get(manager, "/session")
        let cached = try await get(manager, "/session")
        XCTAssertEqual(text(cached), text(before))
        XCTAssertNil(cached.metrics)
        await reset(manager)
        let after = try await get(manager, "/session")
        XCTAssertEqual(text(after), "user 2", "the reset manager does not answer with the previous user's entry")
        XCTAssertNotNil(after.metrics)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// A response to a request with the jar's session cookie is answered only while the jar
    /// sends the same cookies: a reset (which empties the jar) or another cookie is a miss.
    func testJarCookiesAreMatchedBeforeReuse() async throws {
        echoRoute("/account", cacheControl: "max-age=600")
        let jar = CookieJar()
        let host = try XCTUnwrap(try server.url("/").host)
        try jar.add(Cookie(name: "session", value: "alice", domain: host))
        let manager = manager(ResponseCache(), jar: jar)
        let alice = try await get(manager, "/account")
        XCTAssertEqual(text(alice), "session=alice")
        let aliceAgain = try await get(manager, "/account")
        XCTAssertNil(aliceAgain.metrics, "the same cookies: answered from the cache")
        try jar.add(Cookie(name: "session", value: "bob", domain: host))
        let bob = try await get(manager, "/account")
        XCTAssertEqual(text(bob), "session=bob", "another cookie value is another identity")
        await reset(manager)
        let anonymous = try await get(manager, "/account")
        XCTAssertEqual(text(anonymous), "anonymous", "the emptied jar sends no cookie: Bob's entry is not his")
        XCTAssertEqual(server.requests.count, 3)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    /// The caller's own Cookie header is part of the identity too, and Vary on Authorization
    /// is honoured through it.
    func testACallersCookieHeaderAndVaryAuthorizationKeepUsersApart() async throws {
        echoRoute("/cookie", cacheControl: "public, max-age=600")
        echoRoute("/varies", cacheControl: "public, max-age=600", extra: [("Vary", "Authorization")])
        let manager = manager(ResponseCache())
        var bodies: [String?] = []
        for (path, name, value) in [
            ("/cookie", "Cookie", "user=alice"), ("/cookie", "Cookie", "user=bob"), ("/varies", "Authorization", "Bearer alice"),
            ("/varies", "Authorization", "Bearer bob"), ("/varies", "Authorization", "Bearer bob"),
        ] {
            bodies.append(text(try await get(manager, path, headers: [name: value])))
        }
        XCTAssertEqual(bodies, ["user=alice", "user=bob", "Bearer alice", "Bearer bob", "Bearer bob"])
        XCTAssertEqual(server.requests.count, 4)
    }

    /// The disk store keeps no credential in clear: not the Authorization or Cookie values, not
    /// as a Vary value either, and no entry for a request that carried any (not even a public
    /// one: its identity digest would allow guessing a password offline).
    func testTheDiskStoreHoldsNoCredentials() async throws {
        server.route("/public", response: TestResponse(
            status: 200, headers: [("Cache-Control", "public, max-age=600"), ("Vary", "Authorization")], body: Data("p".utf8)))
        server.route("/private", response: TestResponse(
            status: 200, headers: [("Cache-Control", "private, max-age=600")], body: Data("q".utf8)))
        let cache = ResponseCache(directory: directory)
        let manager = manager(cache)
        let secrets = ["Authorization": "Bearer s3cret-token-4711", "Cookie": "sid=c00kie-value-0815"]
        _ = try await get(manager, "/public", headers: secrets)
        _ = try await get(manager, "/private", headers: secrets)
        let publicAgain = try await get(manager, "/public", headers: secrets)
        let privateAgain = try await get(manager, "/private", headers: secrets)
        XCTAssertNil(publicAgain.metrics)
        XCTAssertNil(privateAgain.metrics, "kept in memory for its manager")
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        XCTAssertEqual(files.count, 0, "answers to requests with credentials stay in memory")
        for file in files {
            let bytes = try Data(contentsOf: file)
            for secret in ["s3cret-token-4711", "c00kie-value-0815"] {
                XCTAssertNil(bytes.range(of: Data(secret.utf8)), "\(secret) is on disk in \(file.lastPathComponent)")
            }
        }
    }

    /// A response that needed an authentication challenge answered (libcurl then sent
    /// credentials the cache never saw) is not stored.
    func testAResponseAfterAnAnsweredChallengeIsNotStored() async throws {
        server.route("/protected") { request in
            guard Self.header(request, "Authorization") != nil else {
                return TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], body: Data())
            }
            return TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data("secret".utf8))
        }
        let manager = manager(ResponseCache())
        manager.setAuthenticationChallengeHandler { _, _ in
            .useCredential(URLCredential(user: "alice", password: "pw", persistence: .none))
        }
        let first = try await get(manager, "/protected")
        XCTAssertEqual(text(first), "secret")
        manager.setAuthenticationChallengeHandler { _, _ in .rejectProtectionSpace }
        let second = try await get(manager, "/protected")
        XCTAssertEqual(second.response?.statusCode, 401, "an unauthenticated request is not answered with Alice's response")
    }

    /// Managers sharing a cache that send one URL to different servers (host overrides, a
    /// Unix socket): the first server's answer answered the other manager without a request.
    func testManagersRoutedToDifferentServersDoNotAnswerEachOther() async throws {
        let other = try TestServer()
        defer { other.shutdown() }
        for (server, name) in [(server!, "one"), (other, "two")] {
            server.route("/x", response: TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data(name.utf8)))
        }
        let cache = ResponseCache()
        func routed(to server: TestServer) throws -> URLSessionManager {
            var configuration = SessionConfiguration.default
            configuration.responseCache = cache
            configuration.hostOverrides = [try .connect("api.example.test", port: 80, to: "127.0.0.1", port: server.port)]
            return URLSessionManager.raw(configuration)
        }
        let url = try XCTUnwrap(URL(string: "http://api.example.test/x"))
        let first = try await routed(to: server).response(for: URLRequest(url: url))
        let second = try await routed(to: other).response(for: URLRequest(url: url))
        let again = try await routed(to: other).response(for: URLRequest(url: url))
        XCTAssertEqual([first, second, again].map(text), ["one", "two", "two"])
        XCTAssertEqual(server.requests.count + other.requests.count, 2, "a manager with the same route is answered from the cache")
        // Not routed: the URL's own host, which does not resolve here; nothing stored answers it.
        var direct = SessionConfiguration.default
        direct.responseCache = cache
        let unrouted = await URLSessionManager.raw(direct).response(for: URLRequest(url: url, cachePolicy: .returnCacheDataDontLoad))
        XCTAssertEqual(unrouted.error as? SessionError, .resourceNotCached)
    }

    /// A request naming its own `Host` is answered by another site at the URL's server (and
    /// sends that site's cookies): the URL, the entries' key, does not say which. Such requests
    /// neither fill nor read the cache.
    func testARequestNamingItsOwnHostGoesPastTheCache() async throws {
        server.route("/site") { request in
            TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data((Self.header(request, "Host") ?? "-").utf8))
        }
        let manager = manager(ResponseCache())
        let a = try await get(manager, "/site", headers: ["Host": "a.example.test"])
        let b = try await get(manager, "/site", headers: ["Host": "b.example.test"])
        XCTAssertEqual([a, b].map(text), ["a.example.test", "b.example.test"])
        let plain = try await get(manager, "/site")
        XCTAssertEqual(server.requests.count, 3)
        XCTAssertNotEqual(text(plain), "b.example.test")

        // The same named by the configuration's additional headers, for every request.
        let cache = ResponseCache()
        var answers: [String?] = []
        for site in ["c.example.test", "d.example.test"] {
            var configuration = SessionConfiguration.default
            configuration.responseCache = cache
            configuration.httpAdditionalHeaders = ["host": site]
            answers.append(text(try await get(URLSessionManager.raw(configuration), "/site")))
        }
        XCTAssertEqual(answers, ["c.example.test", "d.example.test"])
    }

    /// The same meets a revalidation: a stale anonymous entry, revalidated while the resource
    /// asks for credentials, got a 304 (to the credentials libcurl added) that made it fresh
    /// for a day, and it answered requests without them meanwhile.
    func testA304AfterAnAnsweredChallengeDoesNotFreshenTheEntry() async throws {
        let locked = Mutex(false)
        server.route("/guarded") { request in
            if locked.withLock({ $0 }), Self.header(request, "Authorization") == nil {
                return TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], body: Data())
            }
            if Self.header(request, "If-None-Match") == "\"g\"" {
                return TestResponse(status: 304, headers: [("ETag", "\"g\""), ("Cache-Control", "max-age=86400")], body: Data())
            }
            return TestResponse(status: 200, headers: [("ETag", "\"g\""), ("Cache-Control", "no-cache")], body: Data("open".utf8))
        }
        let cache = ResponseCache()
        let anonymous = manager(cache)
        let stored = try await get(anonymous, "/guarded")
        XCTAssertEqual(text(stored), "open")
        locked.withLock { $0 = true }
        let signedIn = manager(cache)
        signedIn.setAuthenticationChallengeHandler { _, _ in
            .useCredential(URLCredential(user: "alice", password: "pw", persistence: .none))
        }
        let revalidated = try await get(signedIn, "/guarded")
        XCTAssertEqual(revalidated.response?.statusCode, 200)
        XCTAssertEqual(text(revalidated), "open", "the 304 answered with the stored body")
        let after = try await get(anonymous, "/guarded")
        XCTAssertEqual(after.response?.statusCode, 401, "the entry was not made fresh by an answer to credentials")
    }

    /// A 304 from the end of a redirect: the caller's `If-None-Match` went on to the hop, whose
    /// 304 (its own entity tag may be the same string) refreshed the first URL's entry and
    /// filed it under the hop's URL, which then answered with the first URL's body.
    func testA304AtTheEndOfARedirectFilesNothingUnderTheHop() async throws {
        let moved = Mutex(false)
        server.route("/first") { _ in
            if moved.withLock({ $0 }) { return TestResponse(status: 301, headers: [("Location", "/second")], body: Data()) }
            return TestResponse(status: 200, headers: [("ETag", "\"1\""), ("Cache-Control", "no-cache")], body: Data("first".utf8))
        }
        server.route("/second") { request in
            if Self.header(request, "If-None-Match") == "\"1\"" {
                return TestResponse(status: 304, headers: [("ETag", "\"1\""), ("Cache-Control", "max-age=600")], body: Data())
            }
            return TestResponse(status: 200, headers: [("ETag", "\"1\""), ("Cache-Control", "max-age=0")], body: Data("second".utf8))
        }
        let manager = manager(ResponseCache())
        let stored = try await get(manager, "/first")
        XCTAssertEqual(text(stored), "first")
        moved.withLock { $0 = true }
        let conditional = try await get(manager, "/first", headers: ["If-None-Match": "\"1\""])
        XCTAssertEqual(conditional.response?.statusCode, 304)
        let second = try await get(manager, "/second")
        XCTAssertEqual(text(second), "second", "the hop's URL is answered by its own server, not by the first URL's entry")
        let first = try await get(manager, "/first")
        XCTAssertEqual(text(first), "second", "the first URL's entry went with the redirect; its request followed it")
    }

    // MARK: - Item 2: a 304 updates only the entry whose validators the request carried

    func testACallersConditionalRequestDoesNotFreshenAnEntryItDoesNotDescribe() async throws {
        server.route("/versioned") { request in
            if let condition = Self.header(request, "If-None-Match"), condition.contains("\"2\"") {
                return TestResponse(status: 304, headers: [("ETag", "\"2\""), ("Cache-Control", "max-age=600")], body: Data())
            }
            return TestResponse(status: 200, headers: [("ETag", "\"2\""), ("Cache-Control", "max-age=0")], body: Data("v2".utf8))
        }
        // The cache holds v1 (ETag "1"), stale.
        let cache = ResponseCache()
        let url = try server.url("/versioned")
        cache.storeCachedResponse(
            CachedResponse(
                url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                fields: [.init(name: "ETag", value: "\"1\""), .init(name: "Cache-Control", value: "max-age=0")],
                body: Data("v1".utf8), requestDate: Date(), responseDate: Date(), varyingRequestFields: [:]),
            for: URLRequest(url: url))
        let manager = manager(cache)
        let own = try await get(manager, "/versioned", headers: ["If-None-Match": "\"2\""])
        XCTAssertEqual(own.response?.statusCode, 304, "the caller's 304 is its answer")
        let plain = try await get(manager, "/versioned")
        XCTAssertEqual(text(plain), "v2", "v1 was not relabelled \"2\" and served fresh")
        XCTAssertEqual(plain.response?.value(forHTTPHeaderField: "ETag"), "\"2\"")
        XCTAssertEqual(server.requests.last.flatMap { Self.header($0, "If-None-Match") }, "\"1\"", "v1 was revalidated as v1")
    }

    func testNotModifiedDescribesOnlyTheEntryWhoseValidatorsWereSent() throws {
        let url = URL(fileURLWithPath: "/")
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        let entry = CachedResponse(
            url: url, statusCode: 200, httpVersion: "HTTP/1.1",
            fields: [.init(name: "ETag", value: "W/\"1\""), .init(name: "Last-Modified", value: lastModified)],
            body: Data(), requestDate: Date(), responseDate: Date(), varyingRequestFields: [:])
        func head(_ fields: [(String, String)]) -> HTTPResponseHead {
            HTTPResponseHead(url: url, statusCode: 304, httpVersion: "HTTP/1.1", fields: fields)
        }
        func request(_ fields: [String: String]) -> URLRequest {
            var request = URLRequest(url: url)
            for (name, value) in fields { request.setValue(value, forHTTPHeaderField: name) }
            return request
        }
        XCTAssertTrue(CacheFreshness.notModified(head([]), describes: entry, callerRequest: request(["If-None-Match": "\"0\", \"1\""])))
        XCTAssertFalse(CacheFreshness.notModified(head([]), describes: entry, callerRequest: request(["If-None-Match": "\"2\""])))
        XCTAssertFalse(CacheFreshness.notModified(head([]), describes: entry, callerRequest: request(["If-None-Match": "*"])))
        XCTAssertTrue(CacheFreshness.notModified(head([]), describes: entry, callerRequest: request(["If-Modified-Since": lastModified])))
        XCTAssertFalse(CacheFreshness.notModified(
            head([]), describes: entry, callerRequest: request(["If-Modified-Since": "Mon, 07 Nov 1994 08:49:37 GMT"])))
        XCTAssertFalse(CacheFreshness.notModified(head([]), describes: entry, callerRequest: request([:])))
        XCTAssertTrue(CacheFreshness.notModified(head([("ETag", "\"1\"")]), describes: entry, callerRequest: nil))
        XCTAssertFalse(CacheFreshness.notModified(head([("ETag", "\"9\"")]), describes: entry, callerRequest: nil),
                       "a 304 naming another validator describes another representation")
    }
}
