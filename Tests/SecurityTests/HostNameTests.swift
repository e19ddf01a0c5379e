import COpenSSL
import CurlewTestSupport
import Foundation
import Security
import XCTest

/// Wildcards, common names and IP literals, checked with OpenSSL's matcher and strict flags.
final class HostNameTests: XCTestCase {
    func testWildcardMatchesExactlyOneLeftMostLabel() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.wildcardLeaf)
        assertAccepted(policy, trust, domain: "a.wild.test")
        assertAccepted(policy, trust, domain: "WWW.Wild.Test")
        assertRefused(policy, trust, domain: "a.b.wild.test", reason: .hostMismatch)
        assertRefused(policy, trust, domain: "wild.test", reason: .hostMismatch)
        assertRefused(policy, trust, domain: "a.wild.test.evil", reason: .hostMismatch)
    }

    func testPartialWildcardIsRefused() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.wildcardLeaf)
        assertRefused(policy, trust, domain: "foo.partial.test", reason: .hostMismatch)
        // Control: OpenSSL's matcher without X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS would have
        // accepted it, so the refusal above is the flag's doing.
        let leaf = try SecurityTestHelpers.certificate(set.wildcardLeaf.certificateDER)
        let permissive = try withX509(leaf) { x509 in
            "foo.partial.test".withCString { X509_check_host(x509, $0, 0, 0, nil) }
        }
        XCTAssertEqual(permissive, 1)
    }

    func testWildcardNeverMatchesAnIPAddress() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        assertRefused(policy, try SecurityTestHelpers.trust(set.wildcardLeaf), domain: "127.0.0.1", reason: .hostMismatch)
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "127.0.0.1")
    }

    func testCommonNameIsNotUsedAsAHostName() throws {
        let set = try SecurityTestHelpers.generated()
        var policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let trust = try SecurityTestHelpers.trust(set.commonNameOnlyLeaf)
        assertRefused(policy, trust, domain: "cnonly.test", reason: .hostMismatch)
        assertAccepted(policy, trust, domain: nil)
        policy.validatesDomainName = false
        assertAccepted(policy, trust, domain: "cnonly.test")
    }

    /// Borrows the `X509*` behind a certificate by re-parsing its DER (tests only).
    private func withX509<T>(_ certificate: Certificate, _ body: (OpaquePointer) throws -> T) throws -> T {
        let x509: OpaquePointer? = certificate.derData.withUnsafeBytes { raw in
            guard let base = raw.bindMemory(to: UInt8.self).baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            return d2i_X509(nil, &cursor, raw.count)
        }
        let parsed = try XCTUnwrap(x509)
        defer { X509_free(parsed) }
        return try body(parsed)
    }
}
