import COpenSSL
import Foundation
import Security
import XCTest

/// AFNetworking's own `AFSecurityPolicyTests` scenarios, over the real-world chains it
/// shipped (shared/fixtures/afnetworking-certs), each evaluated at a date inside its
/// validity. Trust anchors are given explicitly so results do not depend on the machine's
/// CA bundle (one test covers the system store and skips when it lacks the root).
///
/// The ADN and Google chains are SHA-1 signed (2013–2015). Today's OpenSSL refuses SHA-1
/// signatures from security level 1, and stand-alone evaluation applies the machine's
/// default level, as a handshake does (`testSHA1ChainsAreRefusedAtTheDefaultSecurityLevel`);
/// the AFNetworking scenarios over them are evaluated at level 0, the rules of their time.
final class AFNetworkingFixtureTests: XCTestCase {
    private var folder: URL!
    /// No security level: for the SHA-1 signed fixture chains.
    private let historic = VerificationSettings(securityLevel: 0)

    override func setUpWithError() throws {
        folder = try SecurityTestHelpers.afnetworkingFixtures()
    }

    // MARK: Fixture loading

    private func certificate(_ relativePath: String) throws -> Certificate {
        try Certificate(contentsOf: folder.appendingPathComponent(relativePath))
    }

    /// Certificates of a chain folder, ordered by file name (`*_0.cer` is the leaf).
    private func chain(_ relativePath: String) throws -> [Certificate] {
        let directory = folder.appendingPathComponent(relativePath)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".cer") }.sorted()
        return try names.map { try Certificate(contentsOf: directory.appendingPathComponent($0)) }
    }

    private func httpBinTrust() throws -> ServerTrust {
        ServerTrust(certificates: try chain("HTTPBin.org/HTTPBinOrgServerTrustChain"), verificationDate: SecurityTestHelpers.date("2020-06-01"))
    }

    private func adnTrust() throws -> ServerTrust {
        ServerTrust(certificates: try chain("ADN.net/ADNNetServerTrustChain"), verificationDate: SecurityTestHelpers.date("2015-01-01"))
    }

    private func selfSignedTrust(_ name: String) throws -> ServerTrust {
        ServerTrust(certificates: [try certificate("SelfSigned/\(name).cer")], verificationDate: SecurityTestHelpers.date("2020-01-01"))
    }

    private var httpBinLeaf: Certificate { get throws { try certificate("HTTPBin.org/httpbinorg_02182021.cer") } }
    private var httpBinIntermediate: Certificate { get throws { try certificate("HTTPBin.org/Amazon.cer") } }
    private var httpBinRoot: Certificate { get throws { try certificate("HTTPBin.org/Amazon Root CA 1.cer") } }
    private var foobarCommonName: Certificate { get throws { try certificate("SelfSigned/foobar.com.cer") } }

    /// A policy whose roots are the real-world anchors of the fixture chains.
    private func policy(_ mode: SSLPinningMode = .none, pins: Set<Certificate> = []) throws -> SecurityPolicy {
        var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: pins)
        policy.trustedRootCertificates = [
            try httpBinRoot,                                          // HTTPBin (Amazon Root CA 1)
            try certificate("ADN.net/ADNNetServerTrustChain/adn_2.cer"),   // DigiCert High Assurance EV Root CA
            try certificate("Google.com/GeoTrust_Global_CA_Root.cer"),
        ]
        return policy
    }

    // MARK: Default policy

    func testDefaultPolicyAllowsHTTPBinOrg() throws {
        let policy = try policy()
        assertAccepted(policy, try httpBinTrust(), domain: nil)
        assertAccepted(policy, try httpBinTrust(), domain: "httpbin.org")
        assertAccepted(policy, try httpBinTrust(), domain: "www.httpbin.org")
    }

    func testDefaultPolicyRefusesHTTPBinOrgForAnotherDomain() throws {
        let policy = try policy()
        assertRefused(policy, try httpBinTrust(), domain: "apple.com", reason: .hostMismatch)
        assertRefused(policy, try httpBinTrust(), domain: "invalid.org", reason: .hostMismatch)
        assertRefused(policy, try httpBinTrust(), domain: "a.b.httpbin.org", reason: .hostMismatch)
    }

    func testDefaultPolicyRefusesHTTPBinOrgOutsideItsValidity() throws {
        let policy = try policy()
        var trust = try httpBinTrust()
        trust.verificationDate = SecurityTestHelpers.date("2021-03-01")
        assertRefused(policy, trust, domain: "httpbin.org", reason: .expired)
        trust.verificationDate = SecurityTestHelpers.date("2019-12-01")
        assertRefused(policy, trust, domain: "httpbin.org", reason: .notYetValid)
    }

    func testSystemStoreAnchorsHTTPBinOrg() throws {
        let bundle = URL(fileURLWithPath: "/etc/ssl/certs/ca-certificates.crt")
        let systemRoots = (try? Certificate.certificates(contentsOf: bundle)) ?? []
        guard systemRoots.contains(where: { $0.subjectSummary == "Amazon Root CA 1" }) else {
            throw XCTSkip("this machine's CA bundle has no Amazon Root CA 1")
        }
        assertAccepted(SecurityPolicy.default, try httpBinTrust(), domain: "httpbin.org")
        assertRefused(SecurityPolicy.default, try httpBinTrust(), domain: "apple.com", reason: .hostMismatch)
    }

    func testDefaultPolicyRefusesSelfSignedCertificates() throws {
        let policy = try policy()
        assertRefused(policy, try selfSignedTrust("NoDomains"), domain: nil, reason: .selfSigned)
        assertRefused(policy, try selfSignedTrust("AltName"), domain: nil, reason: .selfSigned)
        var lenient = policy
        lenient.allowInvalidCertificates = true
        assertAccepted(lenient, try selfSignedTrust("AltName"), domain: nil)
    }

    func testWithoutDomainValidationAnyDomainIsAccepted() throws {
        var policy = try policy()
        policy.validatesDomainName = false
        assertAccepted(policy, try httpBinTrust(), domain: "invalid.org")
    }

    // MARK: Public-key pinning

    func testPublicKeyPinningAllowsHTTPBinOrgWithAnyChainKeyPinned() throws {
        for pins in [[try httpBinLeaf], [try httpBinIntermediate], [try httpBinRoot],
                     [try httpBinLeaf, try httpBinIntermediate, try httpBinRoot], [try httpBinLeaf, try foobarCommonName]] {
            let policy = try policy(.publicKey, pins: Set(pins))
            assertAccepted(policy, try httpBinTrust(), domain: nil)
            assertAccepted(policy, try httpBinTrust(), domain: "httpbin.org")
        }
    }

    func testPublicKeyPinningRefusesADNWithHTTPBinOrgPins() throws {
        let policy = try policy(.publicKey, pins: [try httpBinLeaf, try foobarCommonName])
        assertRefused(policy, try adnTrust(), domain: nil, reason: .noPinMatched, settings: historic)
        // Control: ADN's chain is valid, and accepted with its own pin.
        let adnPinned = try self.policy(.publicKey, pins: [try certificate("ADN.net/ADNNetServerTrustChain/adn_1.cer")])
        assertAccepted(adnPinned, try adnTrust(), domain: "app.net", settings: historic)
        assertAccepted(try self.policy(), try adnTrust(), domain: "www.app.net", settings: historic)
    }

    func testPublicKeyPinningRefusesHTTPBinOrgForAnInvalidDomain() throws {
        let policy = try policy(.publicKey, pins: [try httpBinLeaf])
        assertRefused(policy, try httpBinTrust(), domain: "invaliddomainname.com", reason: .hostMismatch)
    }

    func testPublicKeyPinningWithNoPinsRefusesHTTPBinOrg() throws {
        assertRefused(try policy(.publicKey), try httpBinTrust(), domain: nil, reason: .noPinnedCertificates)
    }

    // MARK: Certificate pinning

    func testCertificatePinningAllowsHTTPBinOrgWithAnyChainCertificatePinned() throws {
        for pins in [[try httpBinLeaf], [try httpBinIntermediate], [try httpBinRoot],
                     [try httpBinLeaf, try httpBinIntermediate, try httpBinRoot], [try httpBinLeaf, try foobarCommonName]] {
            assertAccepted(try policy(.certificate, pins: Set(pins)), try httpBinTrust(), domain: "httpbin.org")
        }
    }

    func testCertificatePinningRefusesADNWithHTTPBinOrgPins() throws {
        let policy = try policy(.certificate, pins: [try httpBinLeaf, try foobarCommonName])
        assertRefused(policy, try adnTrust(), domain: nil, reason: .noPinMatched, settings: historic)
        let adnPinned = try self.policy(.certificate, pins: [try certificate("ADN.net/ADNNetServerTrustChain/adn_0.cer")])
        assertAccepted(adnPinned, try adnTrust(), domain: "app.net", settings: historic)
    }

    func testCertificatePinningRefusesHTTPBinOrgForAnInvalidDomainOrWithoutPins() throws {
        assertRefused(try policy(.certificate, pins: [try httpBinLeaf]), try httpBinTrust(), domain: "invaliddomainname.com", reason: .hostMismatch)
        assertRefused(try policy(.certificate), try httpBinTrust(), domain: nil, reason: .noPinnedCertificates)
    }

    // MARK: Google: a pinned root that the server does not send; verified vs sent chain

    func testPinnedRootThatGoogleDoesNotSendAnchorsTheChain() throws {
        let path1 = ServerTrust(certificates: try chain("Google.com/GoogleComServerTrustChainPath1"),
                                verificationDate: SecurityTestHelpers.date("2015-12-01"))
        let geoTrust = try certificate("Google.com/GeoTrust_Global_CA_Root.cer")
        XCTAssertFalse(path1.certificates.contains(geoTrust), "precondition: the root is not sent")
        assertAccepted(try policy(.certificate, pins: [geoTrust]), path1, domain: "www.google.com", settings: historic)
        assertAccepted(try policy(.publicKey, pins: [geoTrust]), path1, domain: "youtube.com", settings: historic)
        assertRefused(try policy(.certificate, pins: [try httpBinRoot]), path1, domain: "google.com", reason: .noPinMatched, settings: historic)
    }

    func testCrossSignedPathIsPinnedOnlyWhenItIsTheVerifiedPath() throws {
        // Path 2 also sends GeoTrust cross-signed by Equifax.
        let path2 = ServerTrust(certificates: try chain("Google.com/GoogleComServerTrustChainPath2"),
                                verificationDate: SecurityTestHelpers.date("2015-12-01"))
        let equifax = try certificate("Google.com/Equifax_Secure_Certificate_Authority_Root.cer")
        // Trusting GeoTrust's self-signed root, the verified path ends there: an Equifax pin
        // does not match, although the server's sent chain leads to Equifax.
        assertRefused(try policy(.publicKey, pins: [equifax]), path2, domain: "google.com", reason: .noPinMatched, settings: historic)
        // Trusting only Equifax, the verified path goes through the cross certificate.
        var viaEquifax = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [equifax])
        viaEquifax.trustedRootCertificates = [equifax]
        assertAccepted(viaEquifax, path2, domain: "google.com", settings: historic)
    }

    /// Stand-alone evaluation applies the machine's default security level (as the
    /// handshake applies its own): the SHA-1 signed ADN chain is refused with OpenSSL's
    /// reason, although it verifies at level 0.
    func testSHA1ChainsAreRefusedAtTheDefaultSecurityLevel() throws {
        guard VerificationSettings.defaultSecurityLevel >= 1 else {
            throw XCTSkip("this machine's OpenSSL default security level is 0")
        }
        switch try policy().evaluateWithReason(try adnTrust(), forDomain: "app.net") {
        case .success:
            XCTFail("a SHA-1 signed chain was accepted at security level \(VerificationSettings.defaultSecurityLevel)")
        case .failure(let error):
            XCTAssertEqual(error.reason, .invalidChain, "\(error)")
            XCTAssertEqual(error.openSSLVerifyResult, X509_V_ERR_CA_MD_TOO_WEAK, "\(error)")
        }
        assertAccepted(try policy(), try adnTrust(), domain: "app.net", settings: historic)
    }

    // MARK: Self-signed certificates and domain validation

    func testPinnedSelfSignedCertificateWithADNSNameIsAcceptedForThatName() throws {
        for mode in [SSLPinningMode.publicKey, .certificate] {
            var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: [try certificate("SelfSigned/AltName.cer")])
            policy.allowInvalidCertificates = true
            assertAccepted(policy, try selfSignedTrust("AltName"), domain: "foobar.com")
            assertRefused(policy, try selfSignedTrust("AltName"), domain: "other.com", reason: .hostMismatch)
        }
    }

    func testPinnedSelfSignedCertificateWithoutDomainsIsRefusedForADomain() throws {
        var policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [try certificate("SelfSigned/NoDomains.cer")])
        policy.allowInvalidCertificates = true
        assertRefused(policy, try selfSignedTrust("NoDomains"), domain: "foobar.com", reason: .hostMismatch)
        assertAccepted(policy, try selfSignedTrust("NoDomains"), domain: nil)
    }

    /// Deviation from AFNetworking, on purpose: AFSecurityPolicy accepted this only because
    /// public-key pinning with invalid certificates allowed skipped the host check; Curlew
    /// checks the host in every mode and never falls back to the common name.
    func testPinnedSelfSignedCertificateWithOnlyACommonNameIsRefusedForThatName() throws {
        var policy = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [try foobarCommonName])
        policy.allowInvalidCertificates = true
        assertRefused(policy, try selfSignedTrust("foobar.com"), domain: "foobar.com", reason: .hostMismatch)
        policy.validatesDomainName = false
        assertAccepted(policy, try selfSignedTrust("foobar.com"), domain: "foobar.com")
    }

    func testInvalidCertificatesAllowedWithoutPinsAndWithDomainValidationAreRefused() throws {
        var noMode = SecurityPolicy(pinningMode: .none, pinnedCertificates: [try certificate("SelfSigned/AltName.cer")])
        noMode.allowInvalidCertificates = true
        assertRefused(noMode, try selfSignedTrust("AltName"), domain: "foobar.com", reason: .domainValidationRequiresPinning)
        var noPins = SecurityPolicy(pinningMode: .publicKey)
        noPins.allowInvalidCertificates = true
        assertRefused(noPins, try selfSignedTrust("AltName"), domain: "foobar.com", reason: .noPinnedCertificates)
        // Control: without domain validation the self-signed server is accepted.
        noMode.validatesDomainName = false
        assertAccepted(noMode, try selfSignedTrust("AltName"), domain: "foobar.com")
    }
}
