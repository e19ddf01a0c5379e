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

    func testMissingClientCertificateIsRefused() async throws {
        let server = try mutualServer()
        defer { server.shutdown() }
        let manager = try manager(nil)
        let response = await manager.get(try server.url("/x"))
        guard case .failure = response.result else { return XCTFail("expected a failure") }
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
