import CurlewTestSupport
import Foundation
import Security
import XCTest

/// Parsing, identity, metadata and bad input for `Certificate`.
final class CertificateTests: XCTestCase {
    private var scratch: URL!

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-cert-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: scratch)
    }

    func testDERAndPEMOfTheSameCertificateAreEqual() throws {
        let set = try SecurityTestHelpers.generated()
        let fromDER = try Certificate(derEncoded: Data(contentsOf: set.leaf.certificateDER))
        let fromPEM = try Certificate(pemEncoded: String(contentsOf: set.leaf.certificatePEM, encoding: .utf8))
        XCTAssertEqual(fromDER, fromPEM)
        XCTAssertEqual(fromDER.hashValue, fromPEM.hashValue)
        XCTAssertEqual(fromDER.derData, try Data(contentsOf: set.leaf.certificateDER))
        XCTAssertEqual(Set([fromDER, fromPEM]).count, 1)
    }

    /// A signature-linked path (a chain that did not verify: invalid certificates allowed, a
    /// handler's trust) is built from the first 16 certificates after the leaf: each step
    /// verified signatures against all the rest, quadratic in a hostile list of hundreds.
    func testASignatureLinkedPathLooksAtTheFirstSixteenSentCertificates() throws {
        let set = try SecurityTestHelpers.generated()
        let leaf = try Certificate(contentsOf: set.leaf.certificatePEM)
        let intermediate = try Certificate(contentsOf: set.intermediate.certificatePEM)
        let filler = try Certificate(contentsOf: set.selfSigned.certificatePEM)
        XCTAssertEqual(SecurityPolicy.linkedPathCandidates, 16)
        let within = [leaf] + Array(repeating: filler, count: 15) + [intermediate]
        XCTAssertEqual(SecurityPolicy.signatureLinkedPath(within), [leaf, intermediate])
        let beyond = [leaf] + Array(repeating: filler, count: 16) + [intermediate]
        XCTAssertEqual(SecurityPolicy.signatureLinkedPath(beyond), [leaf])
    }

    func testDifferentCertificatesAreNotEqual() throws {
        let set = try SecurityTestHelpers.generated()
        let leaf = try Certificate(contentsOf: set.leaf.certificatePEM)
        let reissued = try Certificate(contentsOf: set.reissuedLeafSameKey.certificatePEM)
        XCTAssertNotEqual(leaf, reissued)
        // Same key, different certificate: the pin is the same.
        XCTAssertEqual(leaf.publicKeySHA256, reissued.publicKeySHA256)
    }

    func testSubjectSummaryAndValidity() throws {
        let set = try SecurityTestHelpers.generated()
        let root = try Certificate(contentsOf: set.root.certificatePEM)
        XCTAssertEqual(root.subjectSummary, "Curlew Test Root CA")
        XCTAssertTrue(root.subjectName.contains("O=Curlew Tests"), root.subjectName)
        let expired = try Certificate(contentsOf: set.expiredLeaf.certificatePEM)
        XCTAssertEqual(expired.notValidBefore, TestCertificates.expiredValidity.lowerBound)
        XCTAssertEqual(expired.notValidAfter, TestCertificates.expiredValidity.upperBound)
        let future = try Certificate(contentsOf: set.notYetValidLeaf.certificatePEM)
        XCTAssertEqual(future.notValidBefore, set.notYetValidStart)
    }

    func testPublicKeySHA256MatchesTheOpenSSLCommandLine() throws {
        let set = try SecurityTestHelpers.generated()
        let certificate = try Certificate(contentsOf: set.leaf.certificatePEM)
        // The pipeline Docs/Security.md gives for computing a pin from a certificate file.
        let expected = try shell(
            "openssl x509 -in '\(set.leaf.certificatePEM.path)' -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | openssl base64 -A")
        XCTAssertEqual(certificate.publicKeySHA256, expected)
        XCTAssertEqual(Data(base64Encoded: certificate.publicKeySHA256)?.count, 32)
    }

    func testPublicKeySHA256OfARealWorldCertificate() throws {
        let folder = try SecurityTestHelpers.afnetworkingFixtures()
        let httpbin = try Certificate(contentsOf: folder.appendingPathComponent("HTTPBin.org/httpbinorg_02182021.cer"))
        XCTAssertEqual(httpbin.publicKeySHA256, "flUN9mYPmbQZ0jCTHMo2iEhYuYQrJ3iKdeRV7x+8s50=")
        XCTAssertEqual(httpbin.subjectSummary, "httpbin.org")
    }

    func testCodableRoundTripUsesBase64DER() throws {
        let set = try SecurityTestHelpers.generated()
        let certificate = try Certificate(contentsOf: set.intermediate.certificatePEM)
        let json = try JSONEncoder().encode([certificate])
        let text = try XCTUnwrap(String(data: json, encoding: .utf8))
        XCTAssertTrue(text.contains(certificate.derData.base64EncodedString().replacingOccurrences(of: "/", with: "\\/")))
        XCTAssertEqual(try JSONDecoder().decode([Certificate].self, from: json), [certificate])
        XCTAssertThrowsError(try JSONDecoder().decode([Certificate].self, from: Data(#"["bm90IGEgY2VydA=="]"#.utf8)))
        XCTAssertThrowsError(try JSONDecoder().decode([Certificate].self, from: Data(#"["%%%"]"#.utf8)))
    }

    func testPEMBundleYieldsEveryCertificateInOrder() throws {
        let set = try SecurityTestHelpers.generated()
        let chain = try Certificate.certificates(contentsOf: set.leaf.fullChainPEM)
        XCTAssertEqual(chain.map(\.subjectSummary), ["localhost", "Curlew Test Intermediate CA", "Curlew Test Root CA"])
        // A key block before the certificate is skipped.
        let keyThenCertificate = try String(contentsOf: set.leaf.privateKeyPEM, encoding: .utf8)
            + String(contentsOf: set.leaf.certificatePEM, encoding: .utf8)
        XCTAssertEqual(try Certificate(pemEncoded: keyThenCertificate), chain[0])
    }

    // MARK: Bad input

    func testGarbageFileIsRefusedWithItsName() throws {
        let file = scratch.appendingPathComponent("garbage.cer")
        try Data((0..<300).map { UInt8($0 % 251) }).write(to: file)
        assertCertificateError(try Certificate(contentsOf: file), code: .malformedDER, file: file)
    }

    func testTruncatedDERFileIsRefusedWithItsName() throws {
        let set = try SecurityTestHelpers.generated()
        let der = try Data(contentsOf: set.leaf.certificateDER)
        let file = scratch.appendingPathComponent("truncated.der")
        try der.prefix(der.count / 2).write(to: file)
        assertCertificateError(try Certificate(contentsOf: file), code: .malformedDER, file: file)
        // Positive control: the whole file parses.
        XCTAssertNoThrow(try Certificate(derEncoded: der))
    }

    func testTrailingBytesAfterDERAreRefused() throws {
        let set = try SecurityTestHelpers.generated()
        let der = try Data(contentsOf: set.leaf.certificateDER)
        XCTAssertThrowsError(try Certificate(derEncoded: der + Data([0, 1, 2]))) { error in
            XCTAssertEqual((error as? CertificateError)?.code, .trailingData)
        }
    }

    func testPEMGivenAsDERIsRefusedClearly() throws {
        let set = try SecurityTestHelpers.generated()
        let pem = try Data(contentsOf: set.leaf.certificatePEM)
        XCTAssertThrowsError(try Certificate(derEncoded: pem)) { error in
            XCTAssertEqual((error as? CertificateError)?.code, .pemWhereDERExpected)
            XCTAssertTrue("\(error)".contains("init(pemEncoded:)"), "\(error)")
        }
    }

    func testTruncatedPEMFileIsRefusedWithItsName() throws {
        let set = try SecurityTestHelpers.generated()
        let pem = try String(contentsOf: set.leaf.certificatePEM, encoding: .utf8)
        let file = scratch.appendingPathComponent("truncated.pem")
        try Data(pem.utf8.prefix(pem.utf8.count / 2)).write(to: file)
        assertCertificateError(try Certificate(contentsOf: file), code: .malformedPEM, file: file)
    }

    func testCorruptedPEMBodyIsRefusedWithItsName() throws {
        let set = try SecurityTestHelpers.generated()
        var lines = try String(contentsOf: set.leaf.certificatePEM, encoding: .utf8).components(separatedBy: "\n")
        lines[2] = String(repeating: "A", count: lines[2].count)   // valid base64, wrong DER
        let file = scratch.appendingPathComponent("corrupted.crt")
        try Data(lines.joined(separator: "\n").utf8).write(to: file)
        assertCertificateError(try Certificate(contentsOf: file), code: .malformedPEM, file: file)
    }

    func testKeyOnlyPEMFileIsRefusedNamingWhatItHolds() throws {
        let set = try SecurityTestHelpers.generated()
        let file = scratch.appendingPathComponent("key.pem")
        try FileManager.default.copyItem(at: set.leaf.privateKeyPEM, to: file)
        assertCertificateError(try Certificate(contentsOf: file), code: .noCertificateInPEM, file: file)
        XCTAssertThrowsError(try Certificate(contentsOf: file)) { error in
            XCTAssertTrue("\(error)".contains("PRIVATE KEY"), "\(error)")
        }
    }

    func testEmptyAndMissingFilesAreRefusedWithTheirNames() throws {
        let empty = scratch.appendingPathComponent("empty.cer")
        try Data().write(to: empty)
        assertCertificateError(try Certificate(contentsOf: empty), code: .empty, file: empty)
        let missing = scratch.appendingPathComponent("missing.cer")
        assertCertificateError(try Certificate(contentsOf: missing), code: .unreadableFile, file: missing)
        XCTAssertThrowsError(try Certificate(derEncoded: Data())) { error in
            XCTAssertEqual((error as? CertificateError)?.code, .empty)
        }
        XCTAssertThrowsError(try Certificate(pemEncoded: ""))
    }

    // MARK: Folders and path lists

    func testCertificatesInDirectoryReadsOnlyCertificateExtensionsAndNoSubfolders() throws {
        let set = try SecurityTestHelpers.generated()
        try FileManager.default.copyItem(at: set.leaf.certificateDER, to: scratch.appendingPathComponent("a.der"))
        try FileManager.default.copyItem(at: set.root.certificatePEM, to: scratch.appendingPathComponent("b.PEM"))
        try FileManager.default.copyItem(at: set.intermediate.certificateDER, to: scratch.appendingPathComponent("c.cer"))
        try FileManager.default.copyItem(at: set.client.certificatePEM, to: scratch.appendingPathComponent("d.crt"))
        try FileManager.default.copyItem(at: set.wrongHostLeaf.certificatePEM, to: scratch.appendingPathComponent("e.txt"))
        let nested = scratch.appendingPathComponent("nested.pem")   // a folder named like a file
        try FileManager.default.createDirectory(at: nested, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: set.selfSigned.certificatePEM, to: nested.appendingPathComponent("f.pem"))

        let found = Certificate.certificates(inDirectory: scratch)
        let expected = try Set([set.leaf, set.root, set.intermediate, set.client].map { try Certificate(contentsOf: $0.certificatePEM) })
        XCTAssertEqual(found, expected)
        XCTAssertEqual(try Certificate.certificates(inDirectory: scratch, reportingErrors: true), expected)
    }

    func testCertificatesInDirectorySkipsBadFilesButTheReportingVariantNamesThem() throws {
        let set = try SecurityTestHelpers.generated()
        try FileManager.default.copyItem(at: set.leaf.certificateDER, to: scratch.appendingPathComponent("good.der"))
        let bad = scratch.appendingPathComponent("bad.cer")
        try Data("not a certificate".utf8).write(to: bad)
        XCTAssertEqual(Certificate.certificates(inDirectory: scratch).count, 1)
        XCTAssertThrowsError(try Certificate.certificates(inDirectory: scratch, reportingErrors: true)) { error in
            XCTAssertEqual((error as? CertificateError)?.file?.lastPathComponent, "bad.cer")
            XCTAssertTrue("\(error)".contains("bad.cer"), "\(error)")
        }
        XCTAssertEqual(Certificate.certificates(inDirectory: scratch.appendingPathComponent("absent")), [])
    }

    func testCertificatesAtPathsReportsTheFirstBadFile() throws {
        let set = try SecurityTestHelpers.generated()
        let bad = scratch.appendingPathComponent("broken.pem")
        try Data("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8).write(to: bad)
        let good = try Certificate.certificates(atPaths: [set.leaf.certificatePEM.path, set.root.certificateDER.path])
        XCTAssertEqual(good.count, 2)
        XCTAssertThrowsError(try Certificate.certificates(atPaths: [set.leaf.certificatePEM.path, bad.path])) { error in
            XCTAssertEqual((error as? CertificateError)?.file, bad)
            XCTAssertTrue("\(error)".contains(bad.path), "\(error)")
        }
    }

    // MARK: Helpers

    private func assertCertificateError(
        _ expression: @autoclosure () throws -> Certificate, code: CertificateError.Code, file url: URL,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try expression(), file: file, line: line) { error in
            guard let error = error as? CertificateError else {
                return XCTFail("not a CertificateError: \(error)", file: file, line: line)
            }
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
            XCTAssertEqual(error.file, url, file: file, line: line)
            XCTAssertTrue(error.description.contains(url.path), "the message must name the file: \(error)", file: file, line: line)
        }
    }

    private func shell(_ command: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, command)
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
