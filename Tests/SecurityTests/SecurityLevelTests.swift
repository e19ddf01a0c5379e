import COpenSSL
import CurlewTestSupport
import Foundation
import Security
import XCTest

/// OpenSSL's security level in chain evaluation: key sizes and signature digests of every
/// certificate, as OpenSSL's own verification applies them (the chains are generated at
/// test time: an RSA-1024 leaf, and a leaf under a SHA-1 signed intermediate).
final class SecurityLevelTests: XCTestCase {
    private func policy() throws -> SecurityPolicy { try SecurityTestHelpers.policyTrustingTestRoot() }

    /// Outside a handshake the machine's default level applies (2 on Debian).
    func testStandaloneEvaluationAppliesTheDefaultSecurityLevel() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try policy()
        // Positive control: a normal chain from the same root.
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        let level = VerificationSettings.defaultSecurityLevel
        guard level >= 2 else { throw XCTSkip("this machine's OpenSSL default security level is \(level), not 2") }
        assertRefused(policy, try SecurityTestHelpers.trust(set.weakKeyLeaf), domain: "localhost", reason: .invalidChain)
        assertRefused(policy, try SecurityTestHelpers.trust(set.sha1IntermediateLeaf), domain: "localhost", reason: .invalidChain)
        XCTAssertEqual(verifyResult(policy, set.weakKeyLeaf, settings: .standalone), X509_V_ERR_EE_KEY_TOO_SMALL)
        XCTAssertEqual(verifyResult(policy, set.sha1IntermediateLeaf, settings: .standalone), X509_V_ERR_CA_MD_TOO_WEAK)
    }

    /// Level 1 allows an RSA-1024 key (80 bits) but not a SHA-1 signature; level 0 allows both.
    func testExplicitSecurityLevels() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try policy()
        let one = VerificationSettings(securityLevel: 1)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.weakKeyLeaf), domain: "localhost", settings: one)
        XCTAssertEqual(verifyResult(policy, set.sha1IntermediateLeaf, settings: one), X509_V_ERR_CA_MD_TOO_WEAK)
        let zero = VerificationSettings(securityLevel: 0)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.weakKeyLeaf), domain: "localhost", settings: zero)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.sha1IntermediateLeaf), domain: "localhost", settings: zero)
    }

    /// Pinned anchors (certificate mode) are judged at the same level.
    func testCertificatePinningAppliesTheSecurityLevel() throws {
        let set = try SecurityTestHelpers.generated()
        var pinned = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [try SecurityTestHelpers.certificate(set.root.certificatePEM)])
        pinned.trustedRootCertificates = [try SecurityTestHelpers.certificate(set.root.certificatePEM)]
        assertAccepted(pinned, try SecurityTestHelpers.trust(set.sha1IntermediateLeaf), domain: "localhost",
                       settings: VerificationSettings(securityLevel: 0))
        XCTAssertEqual(verifyResult(pinned, set.sha1IntermediateLeaf, settings: VerificationSettings(securityLevel: 1)),
                       X509_V_ERR_CA_MD_TOO_WEAK)
    }

    private func verifyResult(_ policy: SecurityPolicy, _ files: TestCertificates.Files, settings: VerificationSettings) -> Int32? {
        guard let trust = try? SecurityTestHelpers.trust(files) else { return nil }
        guard case .failure(let error) = policy.evaluateWithReason(trust, forDomain: "localhost", settings: settings) else { return nil }
        return error.openSSLVerifyResult
    }
}
