import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import CCurl
import Synchronization
@testable import SessionCore

/// Pooled easy handles are reused without `curl_easy_reset` after a transfer that set only the
/// options every transfer sets again (`EasyHandle.needsReset`). Nothing of one request may
/// reach the next: requests of every kind follow each other on one connection (one slot per
/// host, so one handle) and httpbin echoes what it received.
final class HandleReuseTests: XCTestCase {
    var manager: URLSessionManager!

    override func setUp() async throws {
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 1
        manager = URLSessionManager.raw(configuration)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    private func echo(_ method: String, body: Data? = nil, headers: [String: String] = [:]) async throws -> [String: Any] {
        var request = URLRequest(url: try Peer.url("/anything"))
        request.httpMethod = method
        request.httpBody = body
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let response = await manager.response(for: request)
        XCTAssertEqual(response.response?.statusCode, 200, "\(method): \(response.result)")
        return try json(response.data)
    }

    /// The connection callbacks' user data is set with the base options (the transfer slot):
    /// setting it must not cost every pooled handle a `curl_easy_reset`.
    func testTheConnectionCallbacksDataLeavesAHandleReusable() throws {
        let easy = try XCTUnwrap(EasyHandle())
        let slot = UnsafeMutableRawPointer(easy.transferSlot)
        for option in [CURLOPT_RESOLVER_START_DATA, CURLOPT_SOCKOPTDATA, CURLOPT_PREREQDATA, CURLOPT_PRIVATE] {
            easy.set(option, pointer: slot)
        }
        XCTAssertFalse(easy.needsReset)
    }

    /// Handshakes that called `countingContextCallback`.
    static let contextCallbacks = Atomic<Int>(0)
    static let countingContextCallback: curl_ssl_ctx_callback = { _, _, _ in
        HandleReuseTests.contextCallbacks.add(1, ordering: .relaxed)
        return CURLE_OK
    }

    /// The TLS options of an HTTPS request are set back to libcurl's defaults when its handle
    /// is recycled, without a reset (`EasyHandle.Restorable`): the next handshake on the handle
    /// (here one made by hand, as an HTTPS proxy's for a plain request would be) calls no
    /// verification callback, whose context died with its transfer, and verifies the peer
    /// again. The origin's authorities, the manager's, stay until they change.
    func testTheTLSOptionsOfATransferAreSetBackWhenItsHandleIsRecycled() throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let url = "https://localhost:\(try XCTUnwrap(server.baseURL.port))/"
        let easy = try XCTUnwrap(EasyHandle())
        func handshake() -> CURLcode {
            // A new connection and no resumed session: a full handshake each time.
            _ = curlew_easy_setopt_long(easy.raw, CURLOPT_FRESH_CONNECT, 1)
            _ = curlew_easy_setopt_long(easy.raw, CURLOPT_SSL_SESSIONID_CACHE, 0)
            _ = curlew_easy_setopt_long(easy.raw, CURLOPT_NOBODY, 1)
            _ = url.withCString { curlew_easy_setopt_string(easy.raw, CURLOPT_URL, $0) }
            return curl_easy_perform(easy.raw)
        }
        Self.contextCallbacks.store(0, ordering: .relaxed)
        // Authorities without the test root: only the unverified handshake succeeds.
        XCTAssertTrue(easy.setOriginAuthorities(file: CurlRuntime.systemCABundle, minimumVersion: Int(CURL_SSLVERSION_TLSv1_2)))
        XCTAssertTrue(easy.set(CURLOPT_SSL_VERIFYPEER, 0))
        XCTAssertTrue(easy.set(CURLOPT_SSL_VERIFYHOST, 0))
        let context = UnsafeMutableRawPointer(easy.transferSlot)  // any pointer: never read
        XCTAssertTrue(easy.setSSLContextCallback(Self.countingContextCallback, context: context))
        XCTAssertFalse(easy.needsReset, "TLS options alone cost no reset")
        XCTAssertEqual(handshake(), CURLE_OK)
        XCTAssertEqual(Self.contextCallbacks.load(ordering: .relaxed), 1, "the probe sees a handshake")

        easy.recycle()
        XCTAssertFalse(easy.needsReset)
        XCTAssertTrue(easy.restorable.isEmpty)
        XCTAssertEqual(handshake(), CURLE_PEER_FAILED_VERIFICATION, "verification is on again")
        XCTAssertEqual(Self.contextCallbacks.load(ordering: .relaxed), 1, "no callback after the recycle")

        // Other authorities replace the kept ones: the test root now verifies the server.
        XCTAssertTrue(easy.setOriginAuthorities(file: certificates.root.certificatePEM.path, minimumVersion: Int(CURL_SSLVERSION_TLSv1_2)))
        XCTAssertEqual(handshake(), CURLE_OK)
    }

    func testNoOptionOfOneRequestReachesTheNext() async throws {
        func assertPlainGet(after previous: String) async throws {
            let echoed = try await echo("GET")
            XCTAssertEqual(echoed["method"] as? String, "GET", "after \(previous)")
            XCTAssertEqual(echoed["data"] as? String, "", "after \(previous)")
            let headers = echoed["headers"] as? [String: String] ?? [:]
            XCTAssertNil(headers["Content-Length"], "after \(previous)")
            XCTAssertNil(headers["Content-Type"], "after \(previous)")
            XCTAssertNil(headers["X-Only-Once"], "after \(previous)")
            XCTAssertNil(headers["Authorization"], "after \(previous)")
        }
        try await assertPlainGet(after: "nothing")
        try await assertPlainGet(after: "a GET")

        let posted = try await echo("POST", body: Data("abc".utf8), headers: ["Content-Type": "text/plain", "X-Only-Once": "1"])
        XCTAssertEqual(posted["method"] as? String, "POST")
        XCTAssertEqual(posted["data"] as? String, "abc")
        try await assertPlainGet(after: "a POST with a body")

        var headRequest = URLRequest(url: try Peer.url("/anything"))
        headRequest.httpMethod = "HEAD"
        let head = await manager.response(for: headRequest)
        XCTAssertEqual(head.response?.statusCode, 200)
        XCTAssertEqual(head.data?.count ?? 0, 0)
        try await assertPlainGet(after: "a HEAD")

        let deleted = try await echo("DELETE")
        XCTAssertEqual(deleted["method"] as? String, "DELETE")
        try await assertPlainGet(after: "a DELETE")

        let put = try await echo("PUT", body: Data("x".utf8))
        XCTAssertEqual(put["method"] as? String, "PUT")
        try await assertPlainGet(after: "a PUT")
    }

    /// A credential given for one request (libcurl's USERNAME and HTTPAUTH) is gone for the
    /// next one on the same handle.
    /// A reused handle keeps the URL string it was given until the URL changes: the same URL
    /// again and a different one both reach their own path, on the same connection.
    func testTheSameURLAgainAndAnotherOneReachTheirPaths() async throws {
        for (index, path) in ["/anything/a", "/anything/a", "/anything/b", "/anything/a", "/anything/b"].enumerated() {
            let response = await manager.response(for: URLRequest(url: try Peer.url(path)))
            XCTAssertEqual(response.response?.statusCode, 200, "request \(index)")
            let echoed = try json(response.data)
            XCTAssertEqual((echoed["url"] as? String).map { URL(string: $0)?.path }, path, "request \(index)")
            if index > 0 { XCTAssertTrue(response.metrics?.isReusedConnection ?? false, "request \(index) opened a connection") }
        }
    }

    /// The URL string libcurl keeps (its effective URL, and the URL of its own retries) follows
    /// every change, also after a reset, though an unchanged URL is not set again.
    func testTheHandleKeepsTheLastURLItWasGiven() throws {
        let easy = try XCTUnwrap(EasyHandle())
        XCTAssertTrue(easy.setURL("http://127.0.0.1:1/a", parsed: nil))
        XCTAssertEqual(easy.address(CURLINFO_EFFECTIVE_URL), "http://127.0.0.1:1/a")
        XCTAssertTrue(easy.setURL("http://127.0.0.1:1/a", parsed: nil))
        XCTAssertEqual(easy.address(CURLINFO_EFFECTIVE_URL), "http://127.0.0.1:1/a")
        XCTAssertTrue(easy.setURL("http://127.0.0.1:1/b", parsed: nil))
        XCTAssertEqual(easy.address(CURLINFO_EFFECTIVE_URL), "http://127.0.0.1:1/b")
        easy.reset()
        XCTAssertTrue(easy.setURL("http://127.0.0.1:1/b", parsed: nil))
        XCTAssertEqual(easy.address(CURLINFO_EFFECTIVE_URL), "http://127.0.0.1:1/b", "not set again after a reset")
    }

    func testACredentialIsNotSentAgain() async throws {
        manager.setAuthenticationChallengeHandler { _, _ in
            .useCredential(URLCredential(user: "user", password: "passwd", persistence: .none))
        }
        let authenticated = await manager.response(for: URLRequest(url: try Peer.url("/basic-auth/user/passwd")))
        XCTAssertEqual(authenticated.response?.statusCode, 200)
        let echoed = try await echo("GET")
        XCTAssertNil((echoed["headers"] as? [String: String])?["Authorization"])
    }

    /// Curlew writes the `Accept-Encoding` line itself (libcurl would format the same one per
    /// request): every coding libcurl decodes by default, the caller's value when it set one,
    /// and a compressed answer still arrives decoded.
    func testAcceptEncodingIsSentOnceAndTheAnswerDecoded() async throws {
        guard case .success(let info) = CurlRuntime.state else { return XCTFail("no libcurl") }
        let defaults = try await echo("GET")
        let sent = (defaults["headers"] as? [String: String])?["Accept-Encoding"]
        XCTAssertEqual(sent, info.allContentEncodings)
        XCTAssertTrue(sent?.contains("gzip") ?? false, "\(sent ?? "nil")")

        let chosen = try await echo("GET", headers: ["Accept-Encoding": "identity"])
        XCTAssertEqual((chosen["headers"] as? [String: String])?["Accept-Encoding"], "identity")

        let gzip = await manager.response(for: URLRequest(url: try Peer.url("/gzip")))
        XCTAssertEqual(gzip.response?.statusCode, 200)
        XCTAssertEqual(try json(gzip.data)["gzipped"] as? Bool, true)
        let deflate = await manager.response(for: URLRequest(url: try Peer.url("/deflate")))
        XCTAssertEqual(try json(deflate.data)["deflated"] as? Bool, true)
    }
}
