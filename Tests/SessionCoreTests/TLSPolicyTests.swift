import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Live handshakes against the in-process TLS server: the manager's `SecurityPolicy` is
/// enforced during the handshake, a refused server receives no request byte, and neither
/// a kept-alive connection nor a resumed TLS session skips a changed policy.
final class TLSPolicyTests: XCTestCase {
    /// One accept/refuse case: the server's certificate, the policy, the expected outcome.
    /// Returns the refusal, if any.
    @discardableResult
    private func check(
        _ files: TestCertificates.Files, policy: SecurityPolicy, url path: String = "/x",
        expect reason: TrustEvaluationError.Reason?, file: StaticString = #filePath, line: UInt = #line
    ) async throws -> TrustEvaluationError? {
        let server = try TLSFixture.server(files)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: policy)
        let response = await manager.get(try server.url(path))
        await manager.waitUntilInvalidatedAfterUse()
        if let reason {
            let failure = TLSFixture.trustFailure(response)
            XCTAssertEqual(failure?.reason, reason, "\(response.result)", file: file, line: line)
            XCTAssertFalse(failure?.description.isEmpty ?? true, file: file, line: line)
            // Refused during the handshake: not one byte of the HTTP request reached the server.
            XCTAssertEqual(server.recordedApplicationBytes, 0, file: file, line: line)
            XCTAssertEqual(server.requests.count, 0, file: file, line: line)
            return failure
        } else {
            XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)", file: file, line: line)
            XCTAssertEqual(server.requests.count, 1, file: file, line: line)
            return nil
        }
    }

    // MARK: - Default policy (no pinning)

    func testDefaultPolicyTrustingTestRootAcceptsValidChain() async throws {
        try await check(TLSFixture.certificates().leaf, policy: TLSFixture.trustingTestRoot(), expect: nil)
    }

    func testSystemRootsRefuseTestCAWithReason() async throws {
        try await check(TLSFixture.certificates().leaf, policy: .default, expect: .unknownIssuer)
    }

    func testExpiredLeafRefused() async throws {
        try await check(TLSFixture.certificates().expiredLeaf, policy: TLSFixture.trustingTestRoot(), expect: .expired)
    }

    func testNotYetValidLeafRefused() async throws {
        try await check(TLSFixture.certificates().notYetValidLeaf, policy: TLSFixture.trustingTestRoot(), expect: .notYetValid)
    }

    /// A host written with its trailing dot (`localhost.`), with the default proxy setting
    /// (`.environment`, here with no proxy variable set): libcurl sends the name without the
    /// dot in SNI, and the handshake is still the origin's, judged by the policy (it was taken
    /// for an HTTPS proxy's and refused as `.hostMismatch`).
    func testAHostWithItsTrailingDotIsJudgedAsTheOriginWithTheDefaultProxySetting() async throws {
        let names = ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "http_proxy", "HTTP_PROXY"]
        let saved = names.map { name in (name, getenv(name).map { String(cString: $0) }) }
        for name in names { unsetenv(name) }
        defer { for (name, value) in saved { if let value { setenv(name, value, 1) } } }
        let server = try TLSFixture.server(TLSFixture.certificates().leaf)
        defer { server.shutdown() }
        var configuration = SessionConfiguration.default
        configuration.proxy = .environment
        configuration.timeoutIntervalForRequest = 15
        // The system resolver may not know `localhost.`: libcurl's resolve override does.
        configuration.hostOverrides = [try .resolve("localhost.", port: server.port, to: ["127.0.0.1"])]
        let manager = URLSessionManager(configuration: configuration)
        manager.securityPolicy = try TLSFixture.trustingTestRoot()
        let url = try XCTUnwrap(URL(string: "https://localhost.:\(server.port)/x"))
        let response = await manager.get(url)
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
        XCTAssertEqual(server.requests.count, 1)
        await manager.waitUntilInvalidatedAfterUse()
    }

    func testWrongHostRefusedAndAcceptedWithoutDomainValidation() async throws {
        let certificates = try TLSFixture.certificates()
        try await check(certificates.wrongHostLeaf, policy: TLSFixture.trustingTestRoot(), expect: .hostMismatch)
        var lenient = try TLSFixture.trustingTestRoot()
        lenient.validatesDomainName = false
        try await check(certificates.wrongHostLeaf, policy: lenient, expect: nil)
    }

    func testSelfSignedRefusedUnlessAllowedWithoutDomainValidation() async throws {
        let certificates = try TLSFixture.certificates()
        try await check(certificates.selfSigned, policy: TLSFixture.trustingTestRoot(), expect: .selfSigned)
        var allowInvalid = SecurityPolicy.default
        allowInvalid.allowInvalidCertificates = true
        // AFNetworking: allowing invalid certificates while validating the domain needs a pin.
        try await check(certificates.selfSigned, policy: allowInvalid, expect: .domainValidationRequiresPinning)
        allowInvalid.validatesDomainName = false
        try await check(certificates.selfSigned, policy: allowInvalid, expect: nil)
    }

    func testUnrelatedRootRefused() async throws {
        try await check(TLSFixture.certificates().unrelatedLeaf, policy: TLSFixture.trustingTestRoot(), expect: .unknownIssuer)
    }

    // MARK: - The handshake's verify parameters

    /// The policy verifies the chain with the handshake's own verify parameters, so
    /// OpenSSL's security level (2 on Debian: RSA keys under 2048 bits and SHA-1 signatures
    /// refused) applies as it would to OpenSSL's own verification.
    func testSecurityLevelOfTheHandshakeRefusesWeakChains() async throws {
        let certificates = try TLSFixture.certificates()
        let policy = try TLSFixture.trustingTestRoot()
        // Positive control: a normal chain from the same root passes.
        try await check(certificates.leaf, policy: policy, expect: nil)
        let weakKey = try await check(certificates.weakKeyLeaf, policy: policy, expect: .invalidChain)
        XCTAssertEqual(weakKey?.openSSLVerifyResult, 66, "X509_V_ERR_EE_KEY_TOO_SMALL: \(String(describing: weakKey))")
        let sha1 = try await check(certificates.sha1IntermediateLeaf, policy: policy, expect: .invalidChain)
        XCTAssertEqual(sha1?.openSSLVerifyResult, 68, "X509_V_ERR_CA_MD_TOO_WEAK: \(String(describing: sha1))")
    }

    /// libcurl's own host name check (`CURLOPT_SSL_VERIFYHOST` 2) is on whenever the policy
    /// validates the domain name: a second lock that refuses a wrong host even if the
    /// policy's check were skipped (simulated here).
    func testLibcurlHostCheckIsASecondLock() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.wrongHostLeaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        manager.engine.security.skipsPolicyHostCheck.store(true, ordering: .relaxed)
        let refused = await manager.get(try server.url("/x"))
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .hostMismatch, "\(refused.result)")
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertEqual(server.recordedApplicationBytes, 0)
        // Control: a policy that does not validate the domain name switches libcurl's check off too.
        var lenient = try TLSFixture.trustingTestRoot()
        lenient.validatesDomainName = false
        manager.securityPolicy = lenient
        let accepted = await manager.get(try server.url("/y"))
        XCTAssertTrue(TLSFixture.isSuccess(accepted), "\(accepted.result)")
        await manager.waitUntilInvalidatedAfterUse()
    }

    // MARK: - Pinning

    private func pinned(_ mode: SSLPinningMode, _ pins: [TestCertificates.Files]) throws -> SecurityPolicy {
        var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: Set(try pins.map(TLSFixture.certificate)))
        policy.trustedRootCertificates = [try TLSFixture.certificate(TLSFixture.certificates().root)]
        return policy
    }

    func testPublicKeyPinningSurvivesReissueWithSameKeyAndFailsAfterKeyChange() async throws {
        let certificates = try TLSFixture.certificates()
        let policy = try pinned(.publicKey, [certificates.leaf])
        try await check(certificates.leaf, policy: policy, expect: nil)
        try await check(certificates.reissuedLeafSameKey, policy: policy, expect: nil)
        try await check(certificates.leafNewKey, policy: policy, expect: .noPinMatched)
    }

    func testPublicKeyPinOfIntermediateAcceptsAnyLeafItIssued() async throws {
        let certificates = try TLSFixture.certificates()
        let policy = try pinned(.publicKey, [certificates.intermediate])
        try await check(certificates.leafNewKey, policy: policy, expect: nil)
        try await check(certificates.unrelatedLeaf, policy: policy, expect: .unknownIssuer)
    }

    func testCertificatePinningAcceptsPinnedLeafOnly() async throws {
        let certificates = try TLSFixture.certificates()
        let policy = try pinned(.certificate, [certificates.leaf])
        try await check(certificates.leaf, policy: policy, expect: nil)
        try await check(certificates.reissuedLeafSameKey, policy: policy, expect: .noPinMatched)
    }

    func testCertificatePinnedRootAnchorsChain() async throws {
        let certificates = try TLSFixture.certificates()
        try await check(certificates.leaf, policy: try pinned(.certificate, [certificates.root]), expect: nil)
    }

    // MARK: - Configuration errors

    func testSetSecurityPolicyRefusesEmptyPinSet() throws {
        let manager = TLSFixture.manager(policy: nil)
        XCTAssertThrowsError(try manager.setSecurityPolicy(SecurityPolicy(pinningMode: .publicKey))) { error in
            XCTAssertEqual((error as? SecurityPolicy.ConfigurationError)?.code, .noPinnedCertificates)
        }
        XCTAssertEqual(manager.securityPolicy, .default)  // the previous policy stays
    }

    func testPlainSetterOfInvalidPolicyFailsClosed() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: SecurityPolicy(pinningMode: .certificate))
        let response = await manager.get(try server.url("/x"))
        XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .noPinnedCertificates)
        XCTAssertEqual(server.acceptedConnectionCount, 0)  // refused before connecting
        // Plain http is not affected by the TLS policy.
        let plain = try TestServer { _ in .json("{}") }
        defer { plain.shutdown() }
        let okResponse = await manager.get(try plain.url("/x"))
        XCTAssertTrue(TLSFixture.isSuccess(okResponse), "\(okResponse.result)")
    }

    // MARK: - Policy changes, kept-alive connections and TLS resumption

    func testChangedPolicyRefusesKeptAliveConnection() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let okResponse = await manager.get(try server.url("/1"))
        XCTAssertTrue(TLSFixture.isSuccess(okResponse), "\(okResponse.result)")
        // Positive control: same policy, the kept-alive connection is reused.
        let second = await manager.get(try server.url("/2"))
        XCTAssertTrue(TLSFixture.isSuccess(second))
        XCTAssertEqual(second.metrics?.transactionMetrics.last?.isReusedConnection, true)
        XCTAssertEqual(server.acceptedConnectionCount, 1)
        let bytesBefore = server.recordedApplicationBytes

        // A policy that refuses this server: the open connection must not carry a request.
        manager.securityPolicy = try pinned(.publicKey, [certificates.leafNewKey])
        let refused = await manager.get(try server.url("/3"))
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(refused.result)")
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(server.recordedApplicationBytes, bytesBefore)
        XCTAssertGreaterThanOrEqual(manager.engine.security.statistics.withLock { $0.refusedStaleConnections }, 1)
    }

    func testChangedPolicyThatStillTrustsServerReconnects() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let okResponse = await manager.get(try server.url("/1"))
        XCTAssertTrue(TLSFixture.isSuccess(okResponse), "\(okResponse.result)")
        manager.securityPolicy = try pinned(.publicKey, [certificates.leaf])
        let after = await manager.get(try server.url("/2"))
        XCTAssertTrue(TLSFixture.isSuccess(after), "\(after.result)")
        // Judged again on a new connection by the new policy.
        XCTAssertEqual(server.acceptedConnectionCount, 2)
        XCTAssertEqual(server.handshakeCount, 2)
    }

    /// Six connections kept alive under one policy (the connection cache keeps every one,
    /// `ConnectionCacheLimit`), then a policy that refuses the server, then one that trusts it
    /// again: no pooled connection carries a request of another policy, each refused one costs
    /// no request byte, and the new policy's own connections are reused after it.
    func testChangedPolicyRefusesEveryPooledConnection() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf) { _ in
            // Held long enough that the six requests of a round need six connections.
            var response = TestResponse.json("{}")
            response.delayBeforeHead = .milliseconds(200)
            return response
        }
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let parallel = manager.engine.configuration.httpMaximumConnectionsPerHost
        func round(_ name: String) async throws -> [DataResponse] {
            let urls = try (0..<parallel).map { try server.url("/\(name)/\($0)") }
            return await withTaskGroup(of: DataResponse.self) { group in
                for url in urls { group.addTask { await manager.get(url) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        func connections(of name: String) -> Set<Int> {
            Set(server.requests.filter { $0.path.hasPrefix("/\(name)/") }.map(\.connectionID))
        }

        for response in try await round("first") { XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)") }
        let first = connections(of: "first")
        XCTAssertGreaterThan(first.count, 1, "the first round kept one connection only: nothing pooled to refuse")
        XCTAssertEqual(server.openConnectionCount, first.count, "the first round's connections are kept alive")

        manager.securityPolicy = try pinned(.publicKey, [certificates.leafNewKey])
        let bytesBefore = server.recordedApplicationBytes
        for response in try await round("refused") {
            XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .noPinMatched, "\(response.result)")
        }
        XCTAssertEqual(server.recordedApplicationBytes, bytesBefore, "a request byte reached the server under the refusing policy")
        XCTAssertEqual(connections(of: "refused"), [])

        manager.securityPolicy = try pinned(.publicKey, [certificates.leaf])
        for response in try await round("trusted") { XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)") }
        let trusted = connections(of: "trusted")
        XCTAssertEqual(trusted.intersection(first), [], "a connection of the first policy carried a request of the third")
        for response in try await round("again") { XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)") }
        XCTAssertTrue(connections(of: "again").isSubset(of: trusted), "the new policy's connections were not reused")
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// Resumption with an unchanged policy still happens (positive control), and a session
    /// resumed under a changed policy is refused by the per-request check even when the
    /// session cache is not replaced (the check alone must hold).
    func testResumedSessionUnderChangedPolicyIsRefused() async throws {
        let certificates = try TLSFixture.certificates()
        // keepAlive false: a new TCP connection per request, so each one may resume.
        let server = try TLSFixture.server(certificates.leaf, keepAlive: false)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let security = manager.engine.security
        security.replacesSessionCacheOnPolicyChange.store(false, ordering: .relaxed)
        for index in 0..<3 {
            let response = await manager.get(try server.url("/\(index)"))
            XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
            XCTAssertTrue(server.waitForAllConnectionsClosed())
        }
        let resumed = security.statistics.withLock { $0.admittedResumedSessions }
        print("TLS resumption under an unchanged policy:", security.statistics.withLock { $0 })
        XCTAssertGreaterThanOrEqual(resumed, 1, "unchanged policy: the TLS session is resumed")
        XCTAssertEqual(server.acceptedConnectionCount, 3)

        manager.securityPolicy = try pinned(.publicKey, [certificates.leafNewKey])
        let bytesBefore = server.recordedApplicationBytes
        let refused = await manager.get(try server.url("/refused"))
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(refused.result)")
        XCTAssertEqual(server.recordedApplicationBytes, bytesBefore)
        XCTAssertEqual(server.requests.count, 3)
        let statistics = security.statistics.withLock { $0 }
        XCTAssertGreaterThanOrEqual(statistics.refusedStaleConnections, 1, "\(statistics)")
        XCTAssertEqual(statistics.admittedResumedSessions, resumed, "no resumption admitted after the change")
    }

    /// With the session cache replaced on a policy change (the default), no stale session
    /// is even offered: the new policy sees a full handshake.
    func testPolicyChangeReplacesSessionCache() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf, keepAlive: false)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let security = manager.engine.security
        let okResponse = await manager.get(try server.url("/1"))
        XCTAssertTrue(TLSFixture.isSuccess(okResponse), "\(okResponse.result)")
        XCTAssertTrue(server.waitForAllConnectionsClosed())
        manager.securityPolicy = try pinned(.publicKey, [certificates.leafNewKey])
        let refused = await manager.get(try server.url("/2"))
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched)
        let statistics = security.statistics.withLock { $0 }
        XCTAssertEqual(statistics.sessionCacheReplacements, 1)
        XCTAssertEqual(statistics.refusedHandshakes, 1, "judged by a full handshake")
        XCTAssertEqual(server.requests.count, 1)
    }

    /// A reset session starts with no TLS session of the old one (as documented): the
    /// manager's own cookie jar, whose libcurl share also holds the TLS session cache,
    /// outlives the driver, and the first request after the reset resumed the previous
    /// user's session (with a client certificate, the server would have taken the new user
    /// for the old one).
    func testAResetSessionResumesNoTLSSessionOfTheOldOne() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf, keepAlive: false)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        XCTAssertNotNil(manager.engine.cookieShare, "the default configuration keeps cookies in a jar of its own")
        let security = manager.engine.security
        for index in 0..<2 {
            let response = await manager.get(try server.url("/\(index)"))
            XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
            XCTAssertTrue(server.waitForAllConnectionsClosed())
        }
        let resumedBefore = security.statistics.withLock { $0.admittedResumedSessions }
        XCTAssertGreaterThanOrEqual(resumedBefore, 1, "positive control: the second request resumed the first one's session")

        let invalidated = expectation(forNotification: .sessionDidInvalidate, object: manager)
        manager.invalidateSessionCancelingTasks(false, resetSession: true)
        await fulfillment(of: [invalidated], timeout: 30)
        let after = await manager.get(try server.url("/after"))
        XCTAssertTrue(TLSFixture.isSuccess(after), "\(after.result)")
        let statistics = security.statistics.withLock { $0 }
        XCTAssertEqual(statistics.admittedResumedSessions, resumedBefore, "the old session was resumed after the reset: \(statistics)")
        XCTAssertEqual(statistics.refusedStaleConnections, 0, "the old session was not even offered: \(statistics)")
        await manager.waitUntilInvalidatedAfterUse()
    }

    func testPeerCertificatesRecordsChainAndSendsNothing() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: nil)
        let trust = try await manager.peerCertificates(for: server.baseURL)
        XCTAssertEqual(trust.certificates.first, try TLSFixture.certificate(certificates.leaf))
        XCTAssertEqual(trust.certificates.count, 2)  // leaf + intermediate, as sent
        XCTAssertEqual(server.recordedApplicationBytes, 0)
    }

    /// After a request, the manager holds a kept-alive connection (or, when the server closes
    /// connections, a cached TLS session): inspection must still make a handshake of its own,
    /// record the chain and send nothing.
    func testPeerCertificatesAfterARequestOnTheSameManager() async throws {
        let certificates = try TLSFixture.certificates()
        for keepAlive in [true, false] {
            let server = try TLSFixture.server(certificates.leaf, keepAlive: keepAlive)
            defer { server.shutdown() }
            let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
            let first = await manager.get(try server.url("/first"))
            XCTAssertTrue(TLSFixture.isSuccess(first), "keepAlive \(keepAlive): \(first.result)")
            if !keepAlive { XCTAssertTrue(server.waitForAllConnectionsClosed()) }
            let bytesAfterRequest = server.recordedApplicationBytes
            do {
                let trust = try await manager.peerCertificates(for: server.baseURL)
                XCTAssertEqual(trust.certificates.first, try TLSFixture.certificate(certificates.leaf))
                XCTAssertEqual(trust.certificates.count, 2, "keepAlive \(keepAlive)")
            } catch {
                XCTFail("keepAlive \(keepAlive): peerCertificates failed: \(error)")
            }
            XCTAssertEqual(server.requests.count, 1, "keepAlive \(keepAlive): inspection sends no request")
            XCTAssertEqual(server.recordedApplicationBytes, bytesAfterRequest, "keepAlive \(keepAlive)")
            // The manager still works normally afterwards.
            let after = await manager.get(try server.url("/after"))
            XCTAssertTrue(TLSFixture.isSuccess(after), "keepAlive \(keepAlive): \(after.result)")
            await manager.waitUntilInvalidatedAfterUse()
        }
    }
}

extension URLSessionManager {
    /// Invalidates the manager and waits for its driver to free every handle.
    func waitUntilInvalidatedAfterUse() async {
        invalidateSessionCancelingTasks(true, resetSession: false)
        await waitUntilInvalidated()
    }
}
