import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A server that hangs up during the TLS handshake (after reading the ClientHello) or right
/// after it (before any response): a typed error, no hang, and the retrier is asked about it.
final class FaultTLSHandshakeTests: XCTestCase {
    /// Records what it is asked; retries once, then gives up.
    private final class RecordingRetrier: RequestRetrier {
        let asked = Mutex<[(attempt: Int, error: SessionError?)]>([])
        func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
            asked.withLock { $0.append((attempt, error)) }
            return attempt == 0 ? .retry : .doNotRetry
        }
    }

    private func manager(retrier: (any RequestRetrier)?) throws -> URLSessionManager {
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        manager.requestRetrier = retrier
        return manager
    }

    /// The case name and message of a failure, or a description of what came instead.
    private func failure(_ response: DataResponse) -> (name: String, message: String) {
        guard let error = response.error as? SessionError else {
            return ("no SessionError: \(String(describing: response.error)) \(String(describing: response.response?.statusCode))", "")
        }
        return (caseName(of: error), error.description)
    }

    private func hangUpDuringHandshake(reset: Bool) async throws {
        let server = try ScriptedServer { socket, server in
            guard server.readSome(socket) else { return }  // the ClientHello
            if reset { server.resetOnClose(socket) }
        }
        defer { server.stop() }
        let retrier = RecordingRetrier()
        let manager = try manager(retrier: retrier)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let response = await manager.get(try XCTUnwrap(URL(string: "https://localhost:\(server.port)/")))
        let (name, message) = failure(response)
        // curl reports both as a failed handshake (CURLE_SSL_CONNECT_ERROR) with the cause in
        // its message; the engine tells a cut connection from a refusal by TLS by the socket's
        // error (or OpenSSL's SSL_ERROR_SYSCALL for an end of stream): the network's failure.
        XCTAssertEqual(name, "networkLost", message)
        if reset { XCTAssertTrue(message.contains("reset"), message) }
        XCTAssertNil(response.response)
        XCTAssertEqual(server.acceptedCount, 2, "the retrier's one retry made a second connection")
        let asked = retrier.asked.withLock { $0 }
        XCTAssertEqual(asked.map(\.attempt), [0, 1])
        XCTAssertEqual(asked.map { $0.error.map { caseName(of: $0) } ?? "nil" }, [name, name], "the retrier saw the same typed error twice")
        // The first attempt ran on a new easy handle: it too carries curl's own message, not
        // only the generic text of its code.
        XCTAssertEqual(asked.first?.error?.description, asked.last?.error?.description)
    }

    func testAServerThatClosesAfterTheClientHelloIsANetworkLoss() async throws {
        try await hangUpDuringHandshake(reset: false)
    }

    func testAServerThatResetsAfterTheClientHelloIsANetworkLossNamingTheReset() async throws {
        try await hangUpDuringHandshake(reset: true)
    }

    /// A server restarting resets the connections it had accepted: the default `RetryPolicy`
    /// retries a handshake cut that way and the retry is answered. It was `tlsHandshakeFailed`,
    /// which no retrier retries, so the request failed.
    func testTheDefaultRetryPolicyRetriesAHandshakeTheServerCut() async throws {
        for fault in [TestServerFault.resetImmediately, .closeImmediately] {
            let server = try TLSFixture.server(try TLSFixture.certificates().leaf)
            defer { server.shutdown() }
            server.setFault(fault, forNextConnections: 1)
            let manager = try manager(retrier: RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0, jitter: 0))
            defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
            let response = await manager.get(try server.url("/x"))
            XCTAssertTrue(TLSFixture.isSuccess(response), "\(fault): \(failure(response))")
            XCTAssertEqual(server.acceptedConnectionCount, 2, "\(fault): the cut connection, then the retry's")
        }
    }

    /// A refusal by TLS itself stays a handshake failure, which the default `RetryPolicy` does
    /// not retry: here the server answers the ClientHello in plain HTTP.
    func testARefusalByTLSItselfStaysAHandshakeFailure() async throws {
        let server = try TLSFixture.server(try TLSFixture.certificates().leaf)
        defer { server.shutdown() }
        server.fault = .respondWithRawBytes(Data("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8))
        let manager = try manager(retrier: RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0, jitter: 0))
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let response = await manager.get(try server.url("/x"))
        let (name, message) = failure(response)
        XCTAssertEqual(name, "tlsHandshakeFailed", message)
        XCTAssertEqual(server.acceptedConnectionCount, 1, "not retried")
    }

    /// The handshake completes and the request is read, then the server closes without a byte
    /// of response: curl's "empty reply" is `networkLost`, which the default retry policy retries.
    func testAServerThatClosesAfterTheHandshakeIsANetworkLoss() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf) { _ in .fault(.closeImmediately) }
        defer { server.shutdown() }
        let retrier = RecordingRetrier()
        let manager = try manager(retrier: retrier)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let response = await manager.get(try server.url("/x"))
        let (name, message) = failure(response)
        XCTAssertEqual(name, "networkLost", message)
        XCTAssertEqual(server.requests.count, 2, "two attempts reached the server through TLS")
        XCTAssertEqual(server.handshakeCount, 2, "a fresh handshake for the retry")
        let asked = retrier.asked.withLock { $0 }
        XCTAssertEqual(asked.map { $0.error.map { caseName(of: $0) } ?? "nil" }, ["networkLost", "networkLost"])
    }

    /// The default `RetryPolicy` retries a connection lost after the handshake, up to its limit.
    func testTheDefaultRetryPolicyRetriesALossAfterTheHandshake() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf) { _ in .fault(.closeImmediately) }
        defer { server.shutdown() }
        let manager = try manager(retrier: RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0, jitter: 0))
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let response = await manager.get(try server.url("/x"))
        XCTAssertEqual(failure(response).name, "networkLost", failure(response).message)
        XCTAssertEqual(server.requests.count, 3, "the first attempt and two retries")
    }
}
