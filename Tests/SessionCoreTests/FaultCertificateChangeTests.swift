import CurlewTestSupport
import Foundation
import Security
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The server behind one host and port changes its certificate between two connections (a
/// restart with another certificate): the pins judge the second connection again. Nothing the
/// manager kept from the first (its connection pool, its TLS session cache) lets the second
/// through.
final class FaultCertificateChangeTests: XCTestCase {
    private func server(_ files: TestCertificates.Files, port: Int = 0) throws -> TestServer {
        try TestServer(
            tls: TestServerTLS(certificateChain: files.chainPEM, privateKey: files.privateKeyPEM), port: port
        ) { _ in .json("{\"ok\":true}") }
    }

    /// Serves `first` and then, on the same port, `second`, with one manager pinned to the
    /// leaf; returns the two responses and the second server's request count.
    private func change(
        from first: TestCertificates.Files, to second: TestCertificates.Files, mode: SSLPinningMode
    ) async throws -> (DataResponse, DataResponse, requestsAtSecond: Int) {
        let certificates = try TLSFixture.certificates()
        var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: [try TLSFixture.certificate(certificates.leaf)])
        policy.trustedRootCertificates = [try TLSFixture.certificate(certificates.root)]
        let manager = TLSFixture.manager(policy: policy)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }

        let before = try server(first)
        let port = before.port
        let url = try XCTUnwrap(URL(string: "https://localhost:\(port)/"))
        let firstResponse = await manager.get(url)
        before.shutdown()
        let after = try server(second, port: port)
        defer { after.shutdown() }
        let secondResponse = await manager.get(url)
        return (firstResponse, secondResponse, after.requests.count)
    }

    func testANewKeyOnTheSamePortIsRefusedByTheKeyPin() async throws {
        let certificates = try TLSFixture.certificates()
        let (first, second, reached) = try await change(from: certificates.leaf, to: certificates.leafNewKey, mode: .publicKey)
        XCTAssertTrue(TLSFixture.isSuccess(first), "\(first.result)")
        XCTAssertEqual(TLSFixture.trustFailure(second)?.reason, .noPinMatched, "\(second.result)")
        XCTAssertEqual(reached, 0, "the request reached a server whose key is not pinned")
    }

    func testAReissuedCertificateOnTheSamePortIsRefusedByTheCertificatePin() async throws {
        let certificates = try TLSFixture.certificates()
        let (first, second, reached) = try await change(
            from: certificates.leaf, to: certificates.reissuedLeafSameKey, mode: .certificate)
        XCTAssertTrue(TLSFixture.isSuccess(first), "\(first.result)")
        XCTAssertEqual(TLSFixture.trustFailure(second)?.reason, .noPinMatched, "\(second.result)")
        XCTAssertEqual(reached, 0)
    }

    /// The control: the second connection is judged, not refused because it is new.
    func testAReissuedCertificateWithThePinnedKeyIsStillAccepted() async throws {
        let certificates = try TLSFixture.certificates()
        let (first, second, reached) = try await change(
            from: certificates.leaf, to: certificates.reissuedLeafSameKey, mode: .publicKey)
        XCTAssertTrue(TLSFixture.isSuccess(first), "\(first.result)")
        XCTAssertTrue(TLSFixture.isSuccess(second), "\(second.result)")
        XCTAssertEqual(reached, 1)
    }
}
