import CurlewTestSupport
import Foundation
import Security
import XCTest

/// Shared loading and assertion helpers for the Security tests.
enum SecurityTestHelpers {
    /// The generated certificate set (made once per process with the openssl CLI).
    static func generated() throws -> TestCertificates {
        try TestCertificates.shared()
    }

    /// The one certificate in `url` (PEM or DER).
    static func certificate(_ url: URL) throws -> Certificate {
        try Certificate(contentsOf: url)
    }

    /// What a server would send for `files`: the certificate and its intermediates.
    static func sentChain(_ files: TestCertificates.Files) throws -> [Certificate] {
        try Certificate.certificates(contentsOf: files.chainPEM)
    }

    /// A trust for `files`' sent chain.
    static func trust(_ files: TestCertificates.Files, at date: Date = .now) throws -> ServerTrust {
        ServerTrust(certificates: try sentChain(files), verificationDate: date)
    }

    /// The default policy, trusting only the generated root (never the system store, so
    /// results do not depend on the machine).
    static func policyTrustingTestRoot(_ mode: SSLPinningMode = .none, pins: Set<Certificate> = []) throws -> SecurityPolicy {
        var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: pins)
        policy.trustedRootCertificates = [try certificate(generated().root.certificatePEM)]
        return policy
    }

    /// `<repo>/../shared/fixtures/afnetworking-certs`, found from this file's real path
    /// (symbolic links resolved, so an isolated build tree that links the sources works);
    /// `CURLEW_SHARED_FIXTURES` (the `fixtures` folder) overrides it.
    static func afnetworkingFixtures(file: StaticString = #filePath) throws -> URL {
        let fixtures: URL
        if let override = ProcessInfo.processInfo.environment["CURLEW_SHARED_FIXTURES"], !override.isEmpty {
            fixtures = URL(fileURLWithPath: override)
        } else {
            let repository = URL(fileURLWithPath: "\(file)").resolvingSymlinksInPath()
                .deletingLastPathComponent()   // SecurityTests
                .deletingLastPathComponent()   // Tests
                .deletingLastPathComponent()   // repository root
            fixtures = repository.deletingLastPathComponent().appendingPathComponent("shared/fixtures")
        }
        let folder = fixtures.appendingPathComponent("afnetworking-certs")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            XCTFail("AFNetworking certificate fixtures not found at \(folder.path): clone the shared/ folder beside the repository, or set CURLEW_SHARED_FIXTURES")
            throw CocoaError(.fileNoSuchFile)
        }
        return folder
    }

    /// A date from `yyyy-MM-dd` (UTC noon), for evaluating old real-world chains.
    static func date(_ text: String) -> Date {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return (formatter.date(from: text) ?? Date(timeIntervalSince1970: 0)).addingTimeInterval(12 * 3600)
    }
}

/// The decision of `policy` for `trust`: the public stand-alone evaluation, or the package
/// one with explicit OpenSSL verification settings (e.g. the security level of a historic chain).
private func decision(
    _ policy: SecurityPolicy, _ trust: ServerTrust, domain: String?, settings: VerificationSettings?
) -> Result<Void, TrustEvaluationError> {
    guard let settings else { return policy.evaluateWithReason(trust, forDomain: domain) }
    return policy.evaluateWithReason(trust, forDomain: domain, settings: settings)
}

/// Asserts that `policy` accepts `trust` for `domain` (with the refusal in the message if not).
func assertAccepted(
    _ policy: SecurityPolicy, _ trust: ServerTrust, domain: String?, settings: VerificationSettings? = nil,
    file: StaticString = #filePath, line: UInt = #line
) {
    switch decision(policy, trust, domain: domain, settings: settings) {
    case .success:
        if settings == nil {
            XCTAssertTrue(policy.evaluate(trust, forDomain: domain), "evaluate and evaluateWithReason disagree", file: file, line: line)
        }
    case .failure(let error):
        XCTFail("expected acceptance for \(domain ?? "nil"), got: \(error)", file: file, line: line)
    }
}

/// Asserts that `policy` refuses `trust` for `domain` with `reason`.
func assertRefused(
    _ policy: SecurityPolicy, _ trust: ServerTrust, domain: String?, reason: TrustEvaluationError.Reason,
    settings: VerificationSettings? = nil, file: StaticString = #filePath, line: UInt = #line
) {
    switch decision(policy, trust, domain: domain, settings: settings) {
    case .success:
        XCTFail("expected refusal (\(reason)) for \(domain ?? "nil"), but the trust was accepted", file: file, line: line)
    case .failure(let error):
        XCTAssertEqual(error.reason, reason, "wrong reason: \(error)", file: file, line: line)
        if settings == nil {
            XCTAssertFalse(policy.evaluate(trust, forDomain: domain), "evaluate and evaluateWithReason disagree", file: file, line: line)
        }
    }
}
