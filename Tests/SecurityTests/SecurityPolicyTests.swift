import CurlewTestSupport
import Foundation
import Security
import XCTest

/// Chain validity, dates and host names under `SSLPinningMode.none`, over generated chains.
/// Every refusal has a sibling acceptance with the same setup but the one thing changed.
final class SecurityPolicyTests: XCTestCase {
    func testDefaultPolicyValues() {
        let policy = SecurityPolicy.default
        XCTAssertEqual(policy.pinningMode, .none)
        XCTAssertFalse(policy.allowInvalidCertificates)
        XCTAssertTrue(policy.validatesDomainName)
        XCTAssertTrue(policy.pinnedCertificates.isEmpty)
        XCTAssertNil(policy.trustedRootCertificates)
        XCTAssertNoThrow(try policy.validateConfiguration())
    }

    func testValidChainIsAcceptedForEveryNameItCarries() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.leaf)
        for name in TestCertificates.localhostNames + ["[::1]", "LOCALHOST", "localhost."] {
            assertAccepted(policy, trust, domain: name)
        }
        assertAccepted(policy, trust, domain: nil)
    }

    func testWrongHostIsRefused() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.wrongHostLeaf)
        assertRefused(policy, trust, domain: "localhost", reason: .hostMismatch)
        assertRefused(policy, trust, domain: "127.0.0.1", reason: .hostMismatch)
        assertAccepted(policy, trust, domain: "wrong.example.com")
    }

    func testOtherAddressesAndNamesAreRefused() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.leaf)
        assertRefused(policy, trust, domain: "127.0.0.2", reason: .hostMismatch)
        assertRefused(policy, trust, domain: "::2", reason: .hostMismatch)
        assertRefused(policy, trust, domain: "localhost.example.com", reason: .hostMismatch)
        assertRefused(policy, trust, domain: "localhost\u{0}.example.com", reason: .invalidHostName)
        assertAccepted(policy, trust, domain: "localhost")
    }

    func testEmptyHostNameNeverTurnsTheCheckOff() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.wrongHostLeaf)
        assertRefused(policy, trust, domain: "", reason: .invalidHostName)
        assertRefused(policy, trust, domain: ".", reason: .invalidHostName)
        assertRefused(policy, trust, domain: "[]", reason: .invalidHostName)
        // nil is the explicit "no host to check" (AFNetworking's forDomain:nil).
        assertAccepted(policy, trust, domain: nil)
    }

    func testDomainValidationOffAcceptsAnyName() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.wrongHostLeaf)
        assertRefused(policy, trust, domain: "localhost", reason: .hostMismatch)
        policy.validatesDomainName = false
        assertAccepted(policy, trust, domain: "localhost")
    }

    func testExpiredLeafIsRefusedNowAndAcceptedInsideItsValidity() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        assertRefused(policy, try SecurityTestHelpers.trust(set.expiredLeaf), domain: "localhost", reason: .expired)
        let then = TestCertificates.expiredValidity.lowerBound.addingTimeInterval(86_400 * 100)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.expiredLeaf, at: then), domain: "localhost")
    }

    func testNotYetValidLeafIsRefusedNowAndAcceptedLater() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        assertRefused(policy, try SecurityTestHelpers.trust(set.notYetValidLeaf), domain: "localhost", reason: .notYetValid)
        let later = set.notYetValidStart.addingTimeInterval(86_400)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.notYetValidLeaf, at: later), domain: "localhost")
    }

    func testSelfSignedIsRefusedUnlessItIsATrustedRoot() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.selfSigned)
        assertRefused(policy, trust, domain: "localhost", reason: .selfSigned)
        policy.trustedRootCertificates = [try SecurityTestHelpers.certificate(set.selfSigned.certificatePEM)]
        assertAccepted(policy, trust, domain: "localhost")
    }

    func testChainFromAnUnrelatedRootIsRefusedUnlessThatRootIsTrusted() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.unrelatedLeaf)
        assertRefused(policy, trust, domain: "localhost", reason: .unknownIssuer)
        policy.trustedRootCertificates = [try SecurityTestHelpers.certificate(set.unrelatedRoot.certificatePEM)]
        assertAccepted(policy, trust, domain: "localhost")
    }

    func testMissingIntermediateIsAnUnknownIssuer() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let leafOnly = ServerTrust(certificates: [try SecurityTestHelpers.certificate(set.leaf.certificatePEM)])
        assertRefused(policy, leafOnly, domain: "localhost", reason: .unknownIssuer)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        // A trusted intermediate is an anchor on its own (as an Apple anchor certificate is).
        policy.trustedRootCertificates = [try SecurityTestHelpers.certificate(set.intermediate.certificatePEM)]
        assertAccepted(policy, leafOnly, domain: "localhost")
    }

    func testClientCertificateIsNotAServerCertificate() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        assertRefused(policy, try SecurityTestHelpers.trust(set.client), domain: nil, reason: .invalidChain)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: nil)
    }

    func testEmptyChainIsRefused() throws {
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        assertRefused(policy, ServerTrust(certificates: []), domain: "localhost", reason: .emptyChain)
        var lenient = policy
        lenient.allowInvalidCertificates = true
        assertRefused(lenient, ServerTrust(certificates: []), domain: nil, reason: .emptyChain)
    }

    func testSystemStoreIsTheDefaultAndDoesNotTrustTheTestRoot() throws {
        let set = try SecurityTestHelpers.generated()
        let trust = try SecurityTestHelpers.trust(set.leaf)
        switch SecurityPolicy.default.evaluateWithReason(trust, forDomain: "localhost") {
        case .success:
            XCTFail("the system store must not trust a root generated by the tests")
        case .failure(let error):
            XCTAssertEqual(error.reason, .unknownIssuer)
            XCTAssertTrue(error.description.contains("system trust store"), error.description)
            // The refusal names the certificate OpenSSL could not anchor: the sent intermediate.
            XCTAssertEqual(error.certificateSubject, "Curlew Test Intermediate CA")
            XCTAssertTrue(error.description.contains("Curlew Test Intermediate CA"), error.description)
        }
        assertAccepted(try SecurityTestHelpers.policyTrustingTestRoot(), trust, domain: "localhost")
    }

    // MARK: allowInvalidCertificates without pinning (AFSecurityPolicy's rules)

    func testAllowInvalidCertificatesWithoutADomainAcceptsASelfSignedServer() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.selfSigned)
        assertRefused(policy, trust, domain: nil, reason: .selfSigned)
        policy.allowInvalidCertificates = true
        assertAccepted(policy, trust, domain: nil)
    }

    func testAllowInvalidCertificatesWithDomainValidationRequiresPinning() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot()
        policy.allowInvalidCertificates = true
        let selfSigned = try SecurityTestHelpers.trust(set.selfSigned)
        assertRefused(policy, selfSigned, domain: "localhost", reason: .domainValidationRequiresPinning)
        // Even a valid chain: the configuration itself is what AFSecurityPolicy refuses.
        assertRefused(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost", reason: .domainValidationRequiresPinning)
        // Pins listed without a pinning mode change nothing.
        policy.pinnedCertificates = [try SecurityTestHelpers.certificate(set.selfSigned.certificatePEM)]
        assertRefused(policy, selfSigned, domain: "localhost", reason: .domainValidationRequiresPinning)
        // Controls: no domain validation, or pinning mode, is accepted.
        var noDomain = policy
        noDomain.validatesDomainName = false
        assertAccepted(noDomain, selfSigned, domain: "localhost")
        var pinned = policy
        pinned.pinningMode = .certificate
        assertAccepted(pinned, selfSigned, domain: "localhost")
    }

    // MARK: Coding, equality, concurrency

    func testPolicyCodableRoundTrip() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot(
            .certificate, pins: [try SecurityTestHelpers.certificate(set.intermediate.certificatePEM)])
        policy.allowInvalidCertificates = true
        policy.validatesDomainName = false
        let decoded = try JSONDecoder().decode(SecurityPolicy.self, from: JSONEncoder().encode(policy))
        XCTAssertEqual(decoded, policy)
        XCTAssertEqual(decoded.hashValue, policy.hashValue)
        XCTAssertEqual(decoded.pinningMode, .certificate)
        XCTAssertEqual(decoded.trustedRootCertificates, policy.trustedRootCertificates)
        // The decoded policy evaluates like the original.
        var strict = decoded
        strict.allowInvalidCertificates = false
        strict.validatesDomainName = true
        assertAccepted(strict, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")

        let defaults = try JSONDecoder().decode(SecurityPolicy.self, from: Data("{}".utf8))
        XCTAssertEqual(defaults, SecurityPolicy.default)
    }

    func testChangingRootsOnACopyDoesNotAffectTheOriginal() throws {
        let set = try SecurityTestHelpers.generated()
        let original = try SecurityTestHelpers.policyTrustingTestRoot()
        var copy = original
        copy.trustedRootCertificates = [try SecurityTestHelpers.certificate(set.unrelatedRoot.certificatePEM)]
        let trust = try SecurityTestHelpers.trust(set.leaf)
        assertAccepted(original, trust, domain: "localhost")
        assertRefused(copy, trust, domain: "localhost", reason: .unknownIssuer)
        XCTAssertNotEqual(original, copy)
    }

    func testConcurrentEvaluationsAgree() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(
            .publicKey, pins: [try SecurityTestHelpers.certificate(set.intermediate.certificatePEM)])
        let good = try SecurityTestHelpers.trust(set.leaf)
        let bad = try SecurityTestHelpers.trust(set.unrelatedLeaf)
        let results = ConcurrentResults()
        DispatchQueue.concurrentPerform(iterations: 400) { index in
            let accepted = policy.evaluate(index.isMultiple(of: 2) ? good : bad, forDomain: "localhost")
            results.record(accepted == index.isMultiple(of: 2))
        }
        XCTAssertEqual(results.correct, 400)
    }
}

/// A counter that concurrent test iterations can bump. `@unchecked Sendable`: `lock` guards `count`.
private final class ConcurrentResults: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    func record(_ ok: Bool) {
        lock.lock()
        if ok { count += 1 }
        lock.unlock()
    }

    var correct: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}
