import ArgumentParser
import Foundation
import Security
import SessionCore
import XCTest
@testable import CurlewCLI

/// Each TLS and network flag lands in the session configuration or the security policy.
final class TransportOptionsTests: XCTestCase {
    private let http = URL(string: "http://example.com/")!
    private let https = URL(string: "https://example.com/")!

    private func options(_ arguments: [String]) throws -> TransportOptions {
        try TransportOptions.parse(arguments)
    }

    /// A request run holds at most `collectedBodyLimit` of a collected body (one shown on a
    /// terminal or formatted): no limit let a 4 GB body on a terminal fill the memory before
    /// its binary notice. A limit given already stays.
    func testARequestRunLimitsTheBodiesItCollects() throws {
        var configuration = try options([]).configuration(for: https)
        XCTAssertEqual(configuration.maximumCollectedBodyBytes, 0)
        RequestCommand.limitCollectedBodies(&configuration)
        XCTAssertEqual(configuration.maximumCollectedBodyBytes, RequestCommand.collectedBodyLimit)
        configuration.maximumCollectedBodyBytes = 1000
        RequestCommand.limitCollectedBodies(&configuration)
        XCTAssertEqual(configuration.maximumCollectedBodyBytes, 1000)
    }

    func testDefaultsAreCurlewsExceptRedirects() throws {
        let configuration = try options([]).configuration(for: https)
        XCTAssertEqual(configuration.httpVersion, .http2)
        XCTAssertEqual(configuration.proxy, .environment)
        XCTAssertEqual(configuration.timeoutIntervalForRequest, 60)
        XCTAssertEqual(configuration.maximumRedirects, 30)
        XCTAssertNil(configuration.unixSocketPath)
        XCTAssertNil(configuration.clientCertificate)
        XCTAssertFalse(try options([]).follow)
    }

    func testNetworkFlags() throws {
        let configuration = try options([
            "--proxy", "socks5h://127.0.0.1:1080", "--timeout", "2.5", "--max-redirects", "4", "--unix-socket", "/run/d.sock",
            "--http1.1", "--cert", "/c.pem", "--cert-key", "/k.pem",
        ]).configuration(for: http)
        XCTAssertEqual(configuration.proxy, .url("socks5h://127.0.0.1:1080"))
        XCTAssertEqual(configuration.timeoutIntervalForRequest, 2.5)
        XCTAssertEqual(configuration.maximumRedirects, 4)
        XCTAssertEqual(configuration.unixSocketPath, "/run/d.sock")
        XCTAssertEqual(configuration.httpVersion, .http1_1)
        XCTAssertEqual(
            configuration.clientCertificate,
            .pemFiles(certificate: URL(fileURLWithPath: "/c.pem"), privateKey: URL(fileURLWithPath: "/k.pem"), passphrase: nil))
        XCTAssertEqual(try options(["--cert", "/both.pem"]).configuration(for: http).clientCertificate,
                       .pemFiles(certificate: URL(fileURLWithPath: "/both.pem"), privateKey: URL(fileURLWithPath: "/both.pem"), passphrase: nil))
        XCTAssertEqual(try options(["--timeout", "0"]).configuration(for: http).timeoutIntervalForRequest, .infinity)
        XCTAssertEqual(try options(["--http2"]).configuration(for: http).httpVersion, .http2)
        XCTAssertEqual(try options(["--http2-prior-knowledge"]).configuration(for: http).httpVersion, .http2PriorKnowledge)
    }

    func testConflictsAndBadValuesAreRefused() {
        for arguments in [["--http1.1", "--http2"], ["--http2", "--http2-prior-knowledge"], ["--timeout", "-1"],
                          ["--cert-key", "/k.pem"], ["--pin", "sha256/AAAA"], ["--max-redirects", "-2"]] {
            XCTAssertThrowsError(try options(arguments), "\(arguments)")
        }
    }

    func testPinValues() {
        let digest = Data(repeating: 7, count: 32).base64EncodedString()
        XCTAssertEqual(TransportOptions.pinHash("sha256/\(digest)"), digest)
        XCTAssertEqual(TransportOptions.pinHash("sha256//\(digest)"), digest, "curl's spelling")
        XCTAssertEqual(TransportOptions.pinHash(digest), digest)
        // 0xFC... encodes to a digest that begins with "/": not curl's "sha256//" spelling.
        let slashed = Data([0xFC] + [UInt8](repeating: 1, count: 31)).base64EncodedString()
        XCTAssertTrue(slashed.hasPrefix("/"))
        XCTAssertEqual(TransportOptions.pinHash("sha256/\(slashed)"), slashed)
        XCTAssertEqual(TransportOptions.pinHash("sha256//\(slashed)"), slashed)
        XCTAssertNil(TransportOptions.pinHash("sha256/" + Data(repeating: 7, count: 20).base64EncodedString()), "not a SHA-256")
    }

    func testVerifyNoMakesAPermissivePolicy() async throws {
        let policy = try await options(["--verify=no"]).securityPolicy(for: https, configuration: .default)
        XCTAssertEqual(policy?.allowInvalidCertificates, true)
        XCTAssertEqual(policy?.validatesDomainName, false)
        let none = try await options([]).securityPolicy(for: https, configuration: .default)
        XCTAssertNil(none, "no flag: the default policy")
        do {
            _ = try await options(["--verify", "/no/such/roots.pem"]).securityPolicy(for: https, configuration: .default)
            XCTFail("a missing roots file is an error")
        } catch let failure as ToolFailure {
            XCTAssertTrue(failure.message.hasPrefix("--verify: "), failure.message)
        }
    }
}
