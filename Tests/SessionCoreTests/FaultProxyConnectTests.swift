import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// An HTTP proxy that fails the CONNECT of an `https` request: hangs up after reading it, or
/// refuses it with 407 or 502. Each is a clear error, at once, and nothing is retried behind
/// the caller's back.
final class FaultProxyConnectTests: XCTestCase {
    private func fetchThroughProxy(
        _ proxy: ScriptedServer, credential: URLCredential? = nil, retrier: (any RequestRetrier)? = nil
    ) async throws -> DataResponse {
        var configuration = SessionConfiguration.default
        configuration.proxy = .url(proxy.baseURLString)
        configuration.proxyCredential = credential
        configuration.timeoutIntervalForRequest = 30
        let manager = URLSessionManager.raw(configuration)
        manager.requestRetrier = retrier
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        return await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: "https://origin.invalid/secret"))))
    }

    private func assertConnectWasAsked(_ proxy: ScriptedServer, file: StaticString = #filePath, line: UInt = #line) {
        let heads = proxy.received.withLock { $0 }
        XCTAssertEqual(heads.count, 1, "one CONNECT, no retry", file: file, line: line)
        XCTAssertTrue(heads.first?.hasPrefix("CONNECT origin.invalid:443 HTTP/1.1\r\n") ?? false, "\(heads)", file: file, line: line)
    }

    func testAProxyThatClosesAfterTheConnectIsANetworkLoss() async throws {
        let proxy = try ScriptedServer { socket, server in server.readHead(socket) }
        defer { proxy.stop() }
        let response = try await fetchThroughProxy(proxy)
        guard case .networkLost? = response.error as? SessionError else {
            return XCTFail("expected networkLost, got \(String(describing: response.error))")
        }
        XCTAssertNil(response.response, "the proxy's nothing is not the origin's response")
        assertConnectWasAsked(proxy)
    }

    func testAProxyThatResetsAfterTheConnectIsANetworkLoss() async throws {
        let proxy = try ScriptedServer { socket, server in
            server.readHead(socket)
            server.resetOnClose(socket)
        }
        defer { proxy.stop() }
        let response = try await fetchThroughProxy(proxy)
        guard case .networkLost? = response.error as? SessionError else {
            return XCTFail("expected networkLost, got \(String(describing: response.error))")
        }
        assertConnectWasAsked(proxy)
    }

    private func refusingProxy(status: String) throws -> ScriptedServer {
        try ScriptedServer { socket, server in
            server.readHead(socket)
            server.write(
                socket,
                "HTTP/1.1 \(status)\r\nProxy-Authenticate: Basic realm=\"proxy\"\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope")
        }
    }

    /// A refused tunnel must never read as the origin's answer: the proxy's status is not the
    /// origin's response, and the error names the proxy's status.
    func testAProxyThatRefusesTheConnectWith502IsAnErrorNamingTheStatus() async throws {
        let proxy = try refusingProxy(status: "502 Bad Gateway")
        defer { proxy.stop() }
        let response = try await fetchThroughProxy(proxy)
        let error = try XCTUnwrap(response.error as? SessionError, "\(response.result)")
        XCTAssertTrue(error.description.contains("502"), error.description)
        XCTAssertNotEqual(response.response?.statusCode, 502, "the proxy's 502 passed for the origin's")
        XCTAssertNil(response.data.flatMap { $0.isEmpty ? nil : $0 }, "the proxy's body passed for the origin's")
        assertConnectWasAsked(proxy)
    }

    func testAProxyThatAsksForCredentialsWith407IsAnErrorNamingTheStatus() async throws {
        let proxy = try refusingProxy(status: "407 Proxy Authentication Required")
        defer { proxy.stop() }
        let response = try await fetchThroughProxy(proxy)
        let error = try XCTUnwrap(response.error as? SessionError, "\(response.result)")
        XCTAssertTrue(error.description.contains("407"), error.description)
        XCTAssertNil(response.data.flatMap { $0.isEmpty ? nil : $0 })
        assertConnectWasAsked(proxy)
    }

    /// With a credential the proxy still refuses: one more CONNECT with it at most, then the error.
    func testAProxyThatRefusesTheCredentialEndsWithAnError() async throws {
        let proxy = try refusingProxy(status: "407 Proxy Authentication Required")
        defer { proxy.stop() }
        let response = try await fetchThroughProxy(proxy, credential: URLCredential(user: "u", password: "p", persistence: .none))
        let error = try XCTUnwrap(response.error as? SessionError, "\(response.result)")
        XCTAssertTrue(error.description.contains("407"), error.description)
        let heads = proxy.received.withLock { $0 }
        XCTAssertTrue((1...2).contains(heads.count), "\(heads.count) CONNECTs")
        XCTAssertTrue(heads.allSatisfy { $0.contains("Proxy-Authorization: Basic dTpw") }, "\(heads)")
    }

    /// A refused tunnel is the proxy's answer, not a lost connection: a retry policy sends no
    /// second CONNECT for a 407 (its wrong credential again) or a 403, and never waits for a
    /// route, which is there. A 502 (the proxy could not reach the origin) is retried as an
    /// origin's 502 is, after the back-off: three more CONNECTs.
    func testAProxysRefusalIsNotRetriedAsALostConnection() async throws {
        for status in ["407 Proxy Authentication Required", "403 Forbidden", "502 Bad Gateway"] {
            let proxy = try refusingProxy(status: status)
            defer { proxy.stop() }
            var policy = RetryPolicy(retryLimit: 3, exponentialBackoffScale: 0.01, jitter: 0)
            policy.waitsForConnectivity = true
            let response = try await fetchThroughProxy(
                proxy, credential: URLCredential(user: "u", password: "p", persistence: .none), retrier: policy)
            let error = try XCTUnwrap(response.error as? SessionError, "\(status): \(response.result)")
            XCTAssertFalse(error.isConnectivityFailure, "\(status): \(error)")
            XCTAssertFalse(RetryPolicy.isRetryable(error), "\(status): \(error)")
            XCTAssertTrue(error.description.contains(String(status.prefix(3))), error.description)
            // The status is the error's own value, not a word in libcurl's message to parse.
            guard case .proxyRefusedTunnel(let statusCode, _) = error else {
                XCTFail("\(status): not a refused tunnel: \(error)")
                continue
            }
            XCTAssertEqual(statusCode, Int(status.prefix(3)), status)
            let heads = proxy.received.withLock { $0 }
            // 407: libcurl itself answers the challenge once with the credential.
            let expected = status.hasPrefix("407") ? 1...2 : status.hasPrefix("502") ? 4...4 : 1...1
            XCTAssertTrue(expected.contains(heads.count), "\(status): \(heads.count) CONNECTs")
        }
    }
}
