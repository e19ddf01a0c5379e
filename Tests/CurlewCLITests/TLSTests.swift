import Foundation
import Security
import XCTest
import CurlewTestSupport

/// `--verify`, `--pin`, `--pin-cert`, `--cert` and `curlew pin` against an in-process TLS
/// server whose chain leads to a root only the test knows.
final class TLSTests: XCTestCase {
    private var certificates: TestCertificates!
    private var server: TestServer!
    private var url = ""

    override func setUpWithError() throws {
        certificates = try TestCertificates.shared()
        server = try TestServer(tls: TestServerTLS(certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM))
        server.route("/hello", response: .text("hello over TLS"))
        url = "https://127.0.0.1:\(server.port)/hello"
    }

    override func tearDown() {
        server?.shutdown()
    }

    private func leafPin() throws -> String {
        try Certificate(contentsOf: certificates.leaf.certificatePEM).publicKeySHA256
    }

    func testAnUnknownRootIsATLSFailure() throws {
        let result = try CurlewProcess.run([url])
        XCTAssertEqual(result.status, 9, result.stderr)
        XCTAssertTrue(result.stderr.hasPrefix("curlew: error: The server is not trusted"), result.stderr)
        XCTAssertEqual(result.stderr.filter { $0 == "\n" }.count, 1)
    }

    func testVerifyNoAndVerifyPath() throws {
        let off = try CurlewProcess.run(["--verify=no", url])
        XCTAssertEqual(off.status, 0, off.stderr)
        XCTAssertEqual(off.text, "hello over TLS")
        let rooted = try CurlewProcess.run(["--verify", certificates.root.certificatePEM.path, url])
        XCTAssertEqual(rooted.status, 0, rooted.stderr)
        let wrongRoot = try CurlewProcess.run(["--verify", certificates.unrelatedRoot.certificatePEM.path, url])
        XCTAssertEqual(wrongRoot.status, 9, wrongRoot.stderr)
    }

    func testPins() throws {
        let root = certificates.root.certificatePEM.path
        let pinned = try CurlewProcess.run(["--verify", root, "--pin", "sha256/\(try leafPin())", url])
        XCTAssertEqual(pinned.status, 0, pinned.stderr)
        let otherKey = try Certificate(contentsOf: certificates.unrelatedLeaf.certificatePEM).publicKeySHA256
        let wrong = try CurlewProcess.run(["--verify", root, "--pin", "sha256/\(otherKey)", url])
        XCTAssertEqual(wrong.status, 9, wrong.stderr)
        XCTAssertEqual(try CurlewProcess.run(["--pin", "sha256/short", url]).status, 64)
        let certificatePin = try CurlewProcess.run(["--verify", root, "--pin-cert", certificates.leaf.certificatePEM.path, url])
        XCTAssertEqual(certificatePin.status, 0, certificatePin.stderr)
        let wrongCertificate = try CurlewProcess.run(["--verify", root, "--pin-cert", certificates.leafNewKey.certificatePEM.path, url])
        XCTAssertEqual(wrongCertificate.status, 9, wrongCertificate.stderr)
    }

    func testPinCommandFormats() throws {
        let pin = try leafPin()
        let text = try CurlewProcess.run(["pin", "https://127.0.0.1:\(server.port)"])
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.text.hasPrefix("[0] leaf: "), text.text)
        XCTAssertTrue(text.text.contains("pin:    sha256/\(pin)\n"), text.text)  // OkHttp's form, as PinSet takes it
        let curl = try CurlewProcess.run(["pin", "--format", "curl", "https://127.0.0.1:\(server.port)"])
        XCTAssertTrue(curl.text.hasPrefix("--pinnedpubkey 'sha256//\(pin);"), curl.text)
        let okhttp = try CurlewProcess.run(["pin", "--format", "okhttp", "https://127.0.0.1:\(server.port)"])
        XCTAssertTrue(okhttp.text.contains(".add(\"127.0.0.1\", \"sha256/\(pin)\")"), okhttp.text)
        let own = try CurlewProcess.run(["pin", "--format", "curlew", "https://127.0.0.1:\(server.port)"])
        XCTAssertTrue(own.text.hasPrefix("curlew --pin sha256/\(pin) "), own.text)
    }

    func testClientCertificate() throws {
        server.shutdown()
        server = try TestServer(tls: TestServerTLS(
            certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM,
            trustRoots: certificates.root.certificatePEM, clientCertificateVerification: .required))
        server.route("/hello", response: .text("hello, client"))
        url = "https://127.0.0.1:\(server.port)/hello"
        let root = certificates.root.certificatePEM.path
        let without = try CurlewProcess.run(["--verify", root, url])
        XCTAssertNotEqual(without.status, 0)
        let with = try CurlewProcess.run([
            "--verify", root, "--cert", certificates.client.chainPEM.path, "--cert-key", certificates.client.privateKeyPEM.path, url,
        ])
        XCTAssertEqual(with.status, 0, with.stderr)
        XCTAssertEqual(with.text, "hello, client")
    }
}
