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

    /// A pinned run does not follow a redirect to a plain `http://` URL, whose answer no pin
    /// could check: it fails saying so, and the plain server is never asked. It was followed,
    /// and the unauthenticated answer printed with exit 0. Without pins the hop is followed.
    func testAPinnedRunDoesNotFollowARedirectToPlainHTTP() throws {
        let plain = try TestServer()
        defer { plain.shutdown() }
        plain.route("/plain", response: .text("in the clear"))
        server.route("/away", response: .redirect(to: "http://127.0.0.1:\(plain.port)/plain", status: 302))
        let away = "https://127.0.0.1:\(server.port)/away"
        let root = certificates.root.certificatePEM.path
        for pin in [["--pin", "sha256/\(try leafPin())"], ["--pin-cert", certificates.leaf.certificatePEM.path]] {
            let refused = try CurlewProcess.run(["--verify", root] + pin + ["--follow", away])
            XCTAssertEqual(refused.status, 1, refused.stderr)
            XCTAssertTrue(refused.stderr.contains("not following the redirect to http://127.0.0.1:\(plain.port)/plain"), refused.stderr)
            XCTAssertFalse(refused.text.contains("in the clear"))
        }
        let directory = try CurlewProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let download = try CurlewProcess.run(["-d", "--verify", root, "--pin", "sha256/\(try leafPin())", "--follow", away], in: directory)
        XCTAssertEqual(download.status, 1, download.stderr)
        XCTAssertTrue(download.stderr.contains("not following the redirect"), download.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path), [])
        XCTAssertEqual(plain.requests.count, 0)
        let unpinned = try CurlewProcess.run(["--verify", root, "--follow", away])
        XCTAssertEqual(unpinned.status, 0, unpinned.stderr)
        XCTAssertEqual(unpinned.text, "in the clear")
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
        // The server's refusal is a TLS 1.3 alert at the first read: TLS failed (9), not a
        // lost connection (1, before 2026-11-29).
        let without = try CurlewProcess.run(["--verify", root, url])
        XCTAssertEqual(without.status, 9, without.stderr)
        let with = try CurlewProcess.run([
            "--verify", root, "--cert", certificates.client.chainPEM.path, "--cert-key", certificates.client.privateKeyPEM.path, url,
        ])
        XCTAssertEqual(with.status, 0, with.stderr)
        XCTAssertEqual(with.text, "hello, client")
    }

    /// Without `--verify` the system's roots decide, found as OpenSSL finds them: here a
    /// bundle (`SSL_CERT_FILE`) and a hashed directory (`SSL_CERT_DIR`) made for the test.
    /// The directory is read first and only the root a chain names; the bundle answers for a
    /// chain the directory cannot anchor.
    func testTheSystemRootsComeFromTheBundleAndTheDirectory() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-cli-trust-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let withRoot = folder.appendingPathComponent("with-root")
        let empty = folder.appendingPathComponent("empty")
        for directory in [withRoot, empty] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        try FileManager.default.copyItem(at: certificates.root.certificatePEM, to: withRoot.appendingPathComponent("root.pem"))
        try Self.rehash(withRoot)
        let unrelatedBundle = folder.appendingPathComponent("unrelated.pem")
        try FileManager.default.copyItem(at: certificates.unrelatedRoot.certificatePEM, to: unrelatedBundle)
        let rootBundle = folder.appendingPathComponent("roots.pem")
        try (Data(contentsOf: certificates.unrelatedRoot.certificatePEM) + Data(contentsOf: certificates.root.certificatePEM))
            .write(to: rootBundle)

        let throughDirectory = try CurlewProcess.run(
            [url], environment: ["SSL_CERT_FILE": unrelatedBundle.path, "SSL_CERT_DIR": withRoot.path])
        XCTAssertEqual(throughDirectory.status, 0, throughDirectory.stderr)
        XCTAssertEqual(throughDirectory.text, "hello over TLS")
        let throughBundle = try CurlewProcess.run([url], environment: ["SSL_CERT_FILE": rootBundle.path, "SSL_CERT_DIR": empty.path])
        XCTAssertEqual(throughBundle.status, 0, throughBundle.stderr)
        let neither = try CurlewProcess.run([url], environment: ["SSL_CERT_FILE": unrelatedBundle.path, "SSL_CERT_DIR": empty.path])
        XCTAssertEqual(neither.status, 9, neither.stderr)
        XCTAssertTrue(neither.stderr.contains("unrelated.pem"), "the refusal names the whole store: \(neither.stderr)")
    }

    /// `openssl rehash DIRECTORY`: the `<subject hash>.0` links OpenSSL's directory lookup reads.
    private static func rehash(_ directory: URL) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "rehash", directory.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "openssl rehash \(directory.path)")
    }
}
