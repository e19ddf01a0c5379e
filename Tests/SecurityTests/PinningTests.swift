import CurlewTestSupport
import Foundation
import Security
import XCTest

/// Public-key and certificate pinning over generated chains, including key rotation and
/// pins that a server merely attaches without them being part of the verified chain.
final class PinningTests: XCTestCase {
    private func load(_ files: TestCertificates.Files) throws -> Certificate {
        try SecurityTestHelpers.certificate(files.certificatePEM)
    }

    // MARK: Public-key pinning

    func testPublicKeyPinSurvivesReissueWithTheSameKeyAndFailsAfterAKeyChange() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.leaf)])
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        assertAccepted(policy, try SecurityTestHelpers.trust(set.reissuedLeafSameKey), domain: "localhost")
        assertRefused(policy, try SecurityTestHelpers.trust(set.leafNewKey), domain: "localhost", reason: .noPinMatched)
    }

    func testBackupPinKeepsTheServerReachableAcrossAKeyChange() throws {
        let set = try SecurityTestHelpers.generated()
        let pins: Set<Certificate> = [try load(set.leaf), try load(set.leafNewKey)]
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: pins)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leafNewKey), domain: "localhost")
    }

    func testPublicKeyPinOnTheIntermediateCoversEveryLeafItIssues() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.intermediate)])
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leafNewKey), domain: "localhost")
        var unrelatedRoots = policy
        unrelatedRoots.trustedRootCertificates = [try load(set.root), try load(set.unrelatedRoot)]
        assertRefused(unrelatedRoots, try SecurityTestHelpers.trust(set.unrelatedLeaf), domain: "localhost", reason: .noPinMatched)
    }

    func testPublicKeyPinOnARootThatTheServerDoesNotSendCounts() throws {
        let set = try SecurityTestHelpers.generated()
        let trust = try SecurityTestHelpers.trust(set.leaf)
        XCTAssertFalse(trust.certificates.contains(try load(set.root)), "precondition: the root is not sent")
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.root)])
        assertAccepted(policy, trust, domain: "localhost")
        let wrong = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.unrelatedRoot)])
        assertRefused(wrong, trust, domain: "localhost", reason: .noPinMatched)
    }

    func testPublicKeyPinIsComparedWithTheVerifiedChainNotWithWhatTheServerSent() throws {
        let set = try SecurityTestHelpers.generated()
        // The server sends a leaf from another CA plus the genuine (public) pinned intermediate.
        let attack = ServerTrust(certificates: [try load(set.unrelatedLeaf), try load(set.intermediate)])
        var policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.intermediate)])
        policy.trustedRootCertificates = [try load(set.root), try load(set.unrelatedRoot)]
        assertRefused(policy, attack, domain: "localhost", reason: .noPinMatched)
        // Control: the same policy accepts the genuine chain.
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
    }

    func testWithInvalidCertificatesAllowedOnlyTheSignatureLinkedPathIsCompared() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.intermediate)])
        policy.allowInvalidCertificates = true
        policy.trustedRootCertificates = [try load(set.unrelatedRoot)]   // nothing verifies
        // The intermediate really issued this leaf: accepted though the chain is untrusted.
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        // The intermediate is attached to a self-signed leaf it never issued: refused.
        let attack = ServerTrust(certificates: [try load(set.selfSigned), try load(set.intermediate)])
        assertRefused(policy, attack, domain: "localhost", reason: .noPinMatched)
    }

    func testPinningDoesNotExcuseAnInvalidChain() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.expiredLeaf)])
        let trust = try SecurityTestHelpers.trust(set.expiredLeaf)
        assertRefused(policy, trust, domain: "localhost", reason: .expired)
        policy.allowInvalidCertificates = true
        assertAccepted(policy, trust, domain: "localhost")
    }

    func testPublicKeyPinningStillChecksTheHostName() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.selfSigned)])
        policy.allowInvalidCertificates = true
        let trust = try SecurityTestHelpers.trust(set.selfSigned)
        assertAccepted(policy, trust, domain: "localhost")
        assertRefused(policy, trust, domain: "example.com", reason: .hostMismatch)
        policy.validatesDomainName = false
        assertAccepted(policy, trust, domain: "example.com")
    }

    // MARK: Certificate pinning

    func testCertificatePinOnTheLeafIsTheExactCertificate() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(.certificate, pins: [try load(set.leaf)])
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        // Same key, other certificate: a certificate pin does not survive a reissue.
        assertRefused(policy, try SecurityTestHelpers.trust(set.reissuedLeafSameKey), domain: "localhost", reason: .noPinMatched)
    }

    func testCertificatePinOnAnUnsentRootAnchorsTheChain() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(.certificate, pins: [try load(set.root)])
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leafNewKey), domain: "localhost")
        let wrong = try SecurityTestHelpers.policyTrustingTestRoot(.certificate, pins: [try load(set.unrelatedRoot)])
        assertRefused(wrong, try SecurityTestHelpers.trust(set.leaf), domain: "localhost", reason: .noPinMatched)
    }

    func testCertificatePinAttachedToAForeignChainDoesNotCount() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot(.certificate, pins: [try load(set.intermediate)])
        policy.trustedRootCertificates = [try load(set.root), try load(set.unrelatedRoot)]
        let attack = ServerTrust(certificates: [try load(set.unrelatedLeaf), try load(set.intermediate)])
        assertRefused(policy, attack, domain: "localhost", reason: .noPinMatched)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
    }

    func testCertificatePinningWithASelfSignedPinnedServer() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot(.certificate, pins: [try load(set.selfSigned)])
        let trust = try SecurityTestHelpers.trust(set.selfSigned)
        // Without allowInvalidCertificates the chain must first be valid against the roots.
        assertRefused(policy, trust, domain: "localhost", reason: .selfSigned)
        policy.allowInvalidCertificates = true
        assertAccepted(policy, trust, domain: "localhost")
        assertRefused(policy, trust, domain: "example.com", reason: .hostMismatch)
    }

    func testCertificatePinningStillEnforcesDates() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot(.certificate, pins: [try load(set.root)])
        policy.allowInvalidCertificates = true
        assertRefused(policy, try SecurityTestHelpers.trust(set.expiredLeaf), domain: "localhost", reason: .expired)
        let then = TestCertificates.expiredValidity.lowerBound.addingTimeInterval(86_400)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.expiredLeaf, at: then), domain: "localhost")
    }

    // MARK: Configuration

    func testPinningModeWithNoPinsIsRefusedAtConfigurationAndAtEvaluation() throws {
        let set = try SecurityTestHelpers.generated()
        for mode in [SSLPinningMode.publicKey, .certificate] {
            var policy = try SecurityTestHelpers.policyTrustingTestRoot(mode)
            XCTAssertThrowsError(try policy.validateConfiguration()) { error in
                XCTAssertEqual((error as? SecurityPolicy.ConfigurationError)?.code, .noPinnedCertificates)
                XCTAssertTrue("\(error)".contains(mode.rawValue), "\(error)")
            }
            assertRefused(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost", reason: .noPinnedCertificates)
            var lenient = policy
            lenient.allowInvalidCertificates = true
            assertRefused(lenient, try SecurityTestHelpers.trust(set.selfSigned), domain: "localhost", reason: .noPinnedCertificates)
            // Control: one pin makes the same policy valid and accepting.
            policy.pinnedCertificates = [try load(set.intermediate)]
            XCTAssertNoThrow(try policy.validateConfiguration())
            assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        }
        XCTAssertEqual(SecurityPolicy(pinningMode: .publicKey).pinnedCertificates, [])
    }

    func testRefusalDescriptionNamesTheCertificateAndTheKeys() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(.publicKey, pins: [try load(set.unrelatedRoot)])
        guard case .failure(let error) = policy.evaluateWithReason(try SecurityTestHelpers.trust(set.leaf), forDomain: "localhost") else {
            return XCTFail("expected a refusal")
        }
        XCTAssertEqual(error.certificateSubject, "localhost")
        XCTAssertTrue(error.description.contains("sha256//\(try load(set.leaf).publicKeySHA256)"), error.description)
    }
}
