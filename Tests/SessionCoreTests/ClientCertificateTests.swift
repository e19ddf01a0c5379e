import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Mutual TLS: a server that requires a client certificate gets one from files or memory,
/// and refuses a client without one.
final class ClientCertificateTests: XCTestCase {
    private func mutualServer() throws -> TestServer {
        let certificates = try TLSFixture.certificates()
        return try TLSFixture.server(certificates.leaf, clientRoots: certificates.root.certificatePEM, clientVerification: .required)
    }

    private func manager(_ certificate: ClientCertificate?) throws -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.clientCertificate = certificate
        return TLSFixture.manager(policy: try TLSFixture.trustingTestRoot(), configuration: configuration)
    }

    func testClientCertificateFromFiles() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try mutualServer()
        defer { server.shutdown() }
        let manager = try manager(
            .pemFiles(certificate: certificates.client.chainPEM, privateKey: certificates.client.privateKeyPEM, passphrase: nil))
        let response = await manager.get(try server.url("/x"))
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
        XCTAssertEqual(server.connections.first?.clientCertificatePresented, true)
    }

    func testClientCertificateFromMemory() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try mutualServer()
        defer { server.shutdown() }
        let manager = try manager(
            .pem(
                certificate: try Data(contentsOf: certificates.client.chainPEM),
                privateKey: try Data(contentsOf: certificates.client.privateKeyPEM), passphrase: nil))
        let response = await manager.get(try server.url("/x"))
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
    }

    /// The response cache meets mutual TLS: a server that tells users apart by their client
    /// certificate answers each with its own `max-age=600` page. A cache shared by a manager
    /// presenting Alice's certificate and one presenting none gave the second Alice's page
    /// without asking the server (until 2026-11-28, when the certificate joined the identity).
    func testTheResponseCacheKeepsAnswersToAClientCertificateForIt() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(
            certificates.leaf, clientRoots: certificates.root.certificatePEM, clientVerification: .optional
        ) { _ in
            TestResponse(
                status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "max-age=600")],
                body: Data("{\"page\":1}".utf8))
        }
        defer { server.shutdown() }
        let cache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 0)
        func manager(_ certificate: ClientCertificate?) throws -> URLSessionManager {
            var configuration = SessionConfiguration.default
            configuration.clientCertificate = certificate
            configuration.responseCache = cache
            return TLSFixture.manager(policy: try TLSFixture.trustingTestRoot(), configuration: configuration)
        }
        let alicePEM = try Data(contentsOf: certificates.client.chainPEM)
        let alice = try manager(.pem(
            certificate: alicePEM, privateKey: try Data(contentsOf: certificates.client.privateKeyPEM), passphrase: nil))
        let anonymous = try manager(nil)
        defer {
            alice.invalidateSessionCancelingTasks(true, resetSession: false)
            anonymous.invalidateSessionCancelingTasks(true, resetSession: false)
        }
        let url = try server.url("/me")
        let first = await alice.get(url)
        let second = await alice.get(url)
        XCTAssertTrue(TLSFixture.isSuccess(first) && TLSFixture.isSuccess(second))
        XCTAssertEqual(server.requests.count, 1, "Alice's second request is answered from the cache")
        let other = await anonymous.get(url)
        XCTAssertTrue(TLSFixture.isSuccess(other))
        XCTAssertEqual(server.requests.count, 2, "a manager without Alice's certificate asks the server")
        XCTAssertEqual(server.connections.last?.clientCertificatePresented, false)
    }

    func testMissingClientCertificateIsRefused() async throws {
        let server = try mutualServer()
        defer { server.shutdown() }
        let manager = try manager(nil)
        let response = await manager.get(try server.url("/x"))
        guard case .failure(let error) = response.result else { return XCTFail("expected a failure") }
        // TLS 1.3: the server's refusal is an alert at the first read, after the client's side
        // of the handshake ended. A refusal by TLS (no retry cures it), not a lost connection,
        // which the default RetryPolicy retried and an event stream reconnected after forever.
        guard case .tlsHandshakeFailed(let message)? = error as? SessionError else { return XCTFail("\(error)") }
        XCTAssertTrue(message.contains("alert"), message)
        XCTAssertEqual(server.requests.count, 0)
    }
}

/// `SessionConfiguration.certificateAuthorityFile` still works with the trust policy: its
/// certificates are trusted in addition to the system store.
final class CertificateAuthorityFileTests: XCTestCase {
    func testExtraCAFileIsTrustedByDefaultPolicy() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let manager = Self.manager(trusting: certificates.root)
        let response = await manager.get(try server.url("/x"))
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
    }

    /// The file's roots are tried first and the system's only after them, without being
    /// merged into one set (which parsed every system root at the first HTTPS request); a
    /// chain that neither the file nor the system's roots anchor is refused as before.
    func testTheFilesRootsFirstThenTheSystemsAndNothingElse() async throws {
        let certificates = try TLSFixture.certificates()
        let snapshot = SessionSecurity().snapshot(certificateAuthorityFile: certificates.root.certificatePEM.path)
        XCTAssertNil(snapshot.configurationError)
        XCTAssertEqual(snapshot.policy.trustedRootCertificates, [try TLSFixture.certificate(certificates.root)])
        XCTAssertTrue(snapshot.policy.fallsBackToSystemRoots)

        let server = try TLSFixture.server(certificates.unrelatedLeaf)
        defer { server.shutdown() }
        let manager = Self.manager(trusting: certificates.root)
        let response = await manager.get(try server.url("/x"))
        await manager.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .unknownIssuer, "\(response.result)")
        XCTAssertEqual(server.requests.count, 0)
    }

    /// A manager with the default policy and `root` as its `certificateAuthorityFile`.
    private static func manager(trusting root: TestCertificates.Files) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.certificateAuthorityFile = root.certificatePEM.path
        return TLSFixture.manager(policy: nil, configuration: configuration)
    }
}
