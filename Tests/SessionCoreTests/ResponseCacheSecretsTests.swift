import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// What the response cache keeps of a request's secrets: an answer is filed under the
/// identity of the request actually sent (a retry may carry another `Authorization`), a
/// stored response never replays `Set-Cookie`, and an answer to a request with credentials
/// or cookies never reaches the disk.
final class ResponseCacheSecretsTests: XCTestCase {
    var server: TestServer!
    var directory: URL!

    override func setUp() async throws {
        server = try TestServer()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-secrets-\(UUID().uuidString)")
    }

    override func tearDown() async throws {
        server.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }

    private func manager(_ cache: ResponseCache) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.responseCache = cache
        // No cookie engine: the jar would make the next request another identity. What the
        // cache does with the responses' cookies is the test.
        configuration.httpShouldSetCookies = false
        return URLSessionManager.raw(configuration)
    }

    private func get(_ manager: URLSessionManager, _ path: String, headers: [String: String] = [:]) async throws -> DataResponse {
        var request = URLRequest(url: try server.url(path))
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return await manager.response(for: request)
    }

    private func text(_ response: DataResponse) -> String? { response.data.map { String(decoding: $0, as: UTF8.self) } }

    private func files() -> [URL] {
        (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
    }

    // MARK: - Item C: the identity of the request sent last

    /// The first attempt speaks for Alice and is answered 503; the adapter's retry speaks for
    /// Bob. Bob's answer must not be filed under Alice's identity (the lookup's): Alice's next
    /// request goes to the network.
    func testARetriedResponseSentWithAnotherAuthorizationIsNotServedToTheFirstIdentity() async throws {
        server.route("/me") { request in
            let who = request.header("Authorization") ?? "anonymous"
            guard who != "Bearer alice" else { return TestResponse(status: 503) }
            return TestResponse(status: 200, headers: [("Cache-Control", "private, max-age=600")], body: Data(who.utf8))
        }
        let manager = manager(ResponseCache())
        manager.requestAdapter = SwitchingUserAdapter()
        manager.requestRetrier = RetryUnavailableOnce()
        let first = try await get(manager, "/me")
        XCTAssertNil(first.error)
        XCTAssertEqual(text(first), "Bearer bob", "the retry spoke for Bob")
        XCTAssertEqual(server.requests.map { $0.header("Authorization") }, ["Bearer alice", "Bearer bob"])
        let second = try await get(manager, "/me")  // Alice again (attempt 0)
        XCTAssertNotNil(second.metrics, "Bob's answer was not served from the cache to Alice")
        XCTAssertEqual(server.requests.count, 4)
        XCTAssertEqual(server.requests.first?.header("Authorization"), "Bearer alice")
    }

    // MARK: - Item D: no cookies replayed, no credentials' answers on disk

    func testTheDiskHoldsNoSetCookieAndNoEntryForACredentialedRequest() async throws {
        for path in ["/public", "/account", "/session"] {
            server.route(path, response: TestResponse(
                status: 200,
                headers: [("Cache-Control", "public, max-age=600"), ("Set-Cookie", "sid=s3cret; Path=/"),
                          ("Set-Cookie2", "legacy=s3cret2"), ("Content-Type", "text/plain")],
                body: Data(path.utf8)))
        }
        let cache = ResponseCache(directory: directory)
        XCTAssertNil(cache.diskStoreError)
        let manager = manager(cache)
        let anonymous = try await get(manager, "/public")
        XCTAssertNotNil(anonymous.response?.value(forHTTPHeaderField: "Set-Cookie"), "the network's answer keeps its cookies")
        _ = try await get(manager, "/account", headers: ["Authorization": "Basic YWxpY2U6c2VjcmV0"])
        _ = try await get(manager, "/session", headers: ["Cookie": "sid=abc"])
        try await eventually({ self.files().count >= 1 }, "the anonymous answer is on disk")

        // Memory still answers all three; none replays a cookie.
        let replayed = try await get(manager, "/public")
        XCTAssertNil(replayed.metrics)
        XCTAssertNil(replayed.response?.value(forHTTPHeaderField: "Set-Cookie"), "a cached response never replays Set-Cookie")
        XCTAssertNil(replayed.response?.value(forHTTPHeaderField: "Set-Cookie2"))
        XCTAssertEqual(replayed.response?.value(forHTTPHeaderField: "Content-Type"), "text/plain", "other fields stay")
        let account = try await get(manager, "/account", headers: ["Authorization": "Basic YWxpY2U6c2VjcmV0"])
        XCTAssertNil(account.metrics, "the credentialed answer is kept in memory")
        XCTAssertEqual(text(account), "/account")
        let session = try await get(manager, "/session", headers: ["Cookie": "sid=abc"])
        XCTAssertNil(session.metrics)

        // The disk: one file (the anonymous answer), with no cookie in it.
        XCTAssertEqual(files().count, 1, "\(files().map(\.lastPathComponent))")
        for file in files() {
            let bytes = try Data(contentsOf: file)
            XCTAssertNil(bytes.range(of: Data("s3cret".utf8)), file.lastPathComponent)
            XCTAssertNil(String(decoding: bytes, as: UTF8.self).lowercased().range(of: "set-cookie"), file.lastPathComponent)
        }
        cache.removeAllCachedResponses()
        withExtendedLifetime(manager) {}
    }
}

/// Speaks for Alice on the first attempt and for Bob on every retry (a token refresh that
/// switched accounts).
struct SwitchingUserAdapter: RequestAdapter {
    func adapt(_ request: URLRequest, attempt: Int) -> URLRequest {
        var request = request
        request.setValue(attempt == 0 ? "Bearer alice" : "Bearer bob", forHTTPHeaderField: "Authorization")
        return request
    }
}

/// Retries a first attempt answered 503.
struct RetryUnavailableOnce: RequestRetrier {
    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        attempt == 0 && response?.statusCode == 503 ? .retry : .doNotRetry
    }
}
