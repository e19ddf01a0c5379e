import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// HTTP authentication against httpbin: Digest (libcurl's second pass in the same transfer)
/// and Basic through the challenge handler, and credentials kept for the session.
final class HTTPAuthenticationTests: XCTestCase {
    var manager: URLSessionManager!

    override func setUp() async throws {
        manager = URLSessionManager.raw()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    /// The authentication methods of the challenges the handler saw.
    final class Asked: Sendable {
        let methods = Mutex<[String]>([])
        func withLock<T: Sendable>(_ body: (inout [String]) -> T) -> T { methods.withLock { body(&$0) } }
    }

    /// Counts the handler's calls and answers with `credential`.
    private func answer(with credential: URLCredential) -> Asked {
        let methods = Asked()
        manager.setAuthenticationChallengeHandler { _, challenge in
            methods.withLock { $0.append(challenge.protectionSpace.authenticationMethod) }
            return .useCredential(credential)
        }
        return methods
    }

    func testDigestIsAnsweredFromTheHandler() async throws {
        let asked = answer(with: URLCredential(user: "user", password: "passwd", persistence: .none))
        for path in ["/digest-auth/auth/user/passwd", "/digest-auth/auth/user/passwd/SHA-256"] {
            let response = await manager.response(for: URLRequest(url: try Peer.url(path)))
            XCTAssertEqual(response.response?.statusCode, 200, path)
            let body = try json(response.data)
            XCTAssertEqual(body["authenticated"] as? Bool, true, path)
            XCTAssertEqual(body["user"] as? String, "user", path)
        }
        XCTAssertEqual(asked.withLock { $0 }, [NSURLAuthenticationMethodHTTPDigest, NSURLAuthenticationMethodHTTPDigest])
    }

    func testAWrongDigestPasswordIsBoundedAndDeliversThe401() async throws {
        let asked = answer(with: URLCredential(user: "user", password: "wrong", persistence: .none))
        let response = await manager.response(for: URLRequest(url: try Peer.url("/digest-auth/auth/user/passwd")))
        XCTAssertEqual(response.response?.statusCode, 401)
        XCTAssertEqual(asked.withLock { $0.count }, TransferSecurityState.maximumChallengeAttempts)
    }

    func testBasicFromHttpbin() async throws {
        let asked = answer(with: URLCredential(user: "user", password: "passwd", persistence: .none))
        let response = await manager.response(for: URLRequest(url: try Peer.url("/basic-auth/user/passwd")))
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(try json(response.data)["authenticated"] as? Bool, true)
        XCTAssertEqual(asked.withLock { $0 }, [NSURLAuthenticationMethodHTTPBasic])
    }

    func testAForSessionCredentialAnswersLaterChallengesWithoutTheHandler() async throws {
        let asked = answer(with: URLCredential(user: "user", password: "passwd", persistence: .forSession))
        for _ in 0..<3 {
            let response = await manager.response(for: URLRequest(url: try Peer.url("/digest-auth/auth/user/passwd")))
            XCTAssertEqual(response.response?.statusCode, 200)
        }
        XCTAssertEqual(asked.withLock { $0.count }, 1, "asked once, then the session answered")

        // Without a handler at all, the stored credential still answers (default handling).
        manager.setAuthenticationChallengeHandler(nil)
        let unattended = await manager.response(for: URLRequest(url: try Peer.url("/digest-auth/auth/user/passwd")))
        XCTAssertEqual(unattended.response?.statusCode, 200)

        // Another protection space (another realm/user path is the same realm in httpbin,
        // so use Basic: another scheme) is not answered from it.
        let basic = await manager.response(for: URLRequest(url: try Peer.url("/basic-auth/user/passwd")))
        XCTAssertEqual(basic.response?.statusCode, 401)
    }

    func testANoneCredentialIsAskedForEveryTime() async throws {
        let asked = answer(with: URLCredential(user: "user", password: "passwd", persistence: .none))
        for _ in 0..<2 {
            let response = await manager.response(for: URLRequest(url: try Peer.url("/basic-auth/user/passwd")))
            XCTAssertEqual(response.response?.statusCode, 200)
        }
        XCTAssertEqual(asked.withLock { $0.count }, 2)
    }

    func testAResetSessionForgetsItsCredentials() async throws {
        let asked = answer(with: URLCredential(user: "user", password: "passwd", persistence: .forSession))
        _ = await manager.response(for: URLRequest(url: try Peer.url("/basic-auth/user/passwd")))
        manager.invalidateSessionCancelingTasks(true, resetSession: true)
        try await eventually({ self.asked(asked) == 1 }, "asked once before the reset")
        var response = await manager.response(for: URLRequest(url: try Peer.url("/basic-auth/user/passwd")))
        for _ in 0..<50 where (response.error as? SessionError) == .sessionInvalidated {
            try await Task.sleep(nanoseconds: 20_000_000)  // the reset completes asynchronously
            response = await manager.response(for: URLRequest(url: try Peer.url("/basic-auth/user/passwd")))
        }
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(asked.withLock { $0.count }, 2, "the reset session asked again")
    }

    private func asked(_ methods: Asked) -> Int { methods.withLock { $0.count } }

    func testTheStrongestOfferedSchemeIsChosen() {
        let both = HTTPAuthenticationScheme.parse("Basic realm=\"a\", Digest realm=\"b\", nonce=\"n\", qop=\"auth,auth-int\"")
        XCTAssertEqual(both?.scheme, .digest)
        XCTAssertEqual(both?.realm, "b")
        XCTAssertEqual(HTTPAuthenticationScheme.parse("Basic realm=\"only\"")?.realm, "only")
        XCTAssertNil(HTTPAuthenticationScheme.parse("Bearer realm=\"x\""))
    }

    /// A credential the session stored that the server refuses, a manager without a handler
    /// any more, and a retrier: the stored credential is tried once, the 401 then goes to the
    /// retrier, and its answer ends the task with the 401. Until 2026-11-28 the retrier was
    /// asked from the challenge's phase and its answer dropped: the task waited for its
    /// resource timeout (7 days by default; 10 s here, then `.timedOut`).
    func testARefusedStoredCredentialWithoutAHandlerGoesToTheRetrier() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/locked") { _ in
            TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], body: Data("locked".utf8))
        }
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForResource = 10  // the bound on the hang
        let manager = URLSessionManager.raw(configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        manager.setAuthenticationChallengeHandler { _, _ in
            .useCredential(URLCredential(user: "user", password: "wrong", persistence: .forSession))
        }
        let first = await manager.response(for: URLRequest(url: try server.url("/locked")))
        XCTAssertEqual(first.response?.statusCode, 401)
        manager.setAuthenticationChallengeHandler(nil)
        let retrier = RecordingRetrier { _, _ in .doNotRetry }
        manager.requestRetrier = retrier

        let second = await manager.response(for: URLRequest(url: try server.url("/locked")))

        XCTAssertNil(second.error, "\(String(describing: second.error))")
        XCTAssertEqual(second.response?.statusCode, 401)
        XCTAssertEqual(retrier.asked.withLock { $0 }, ["0 response"], "the retrier was asked once, about the 401")
        let sent = server.requests.suffix(2).map { $0.header("Authorization") != nil }
        XCTAssertEqual(sent, [false, true], "the second task sent the stored credential once")
    }
}
