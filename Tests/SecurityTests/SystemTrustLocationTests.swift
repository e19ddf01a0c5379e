import CurlewTestSupport
import Foundation
@testable import Security
import XCTest

/// The one rule for the system's trusted roots, shared by the policy's system store and
/// libcurl's CA file: `SSL_CERT_FILE` / `SSL_CERT_DIR` first, as OpenSSL, then the defaults.
final class SystemTrustLocationTests: XCTestCase {
    private let defaults = ["/openssl/default.pem", "/distro/bundle.crt"]

    private func resolve(
        _ environment: [String: String], readable: Set<String> = [], directories: Set<String> = []
    ) -> SystemTrustLocation {
        SystemTrustLocation.resolve(
            environment: environment, defaultFiles: defaults, defaultDirectory: "/openssl/certs",
            isReadableFile: { readable.contains($0) }, isDirectory: { directories.contains($0) })
    }

    func testVariableNamesAreOpenSSLs() {
        XCTAssertEqual(SystemTrustLocation.fileVariable, "SSL_CERT_FILE")
        XCTAssertEqual(SystemTrustLocation.directoryVariable, "SSL_CERT_DIR")
    }

    func testCertFileVariableComesFirstEvenWhenDefaultsAreReadable() {
        let location = resolve(["SSL_CERT_FILE": "/mine.pem"], readable: Set(defaults + ["/mine.pem"]))
        XCTAssertEqual(location, SystemTrustLocation(file: "/mine.pem", directory: nil))
    }

    /// A variable set to narrow trust never falls back to the system's roots.
    func testUnreadableCertFileVariableDoesNotFallBack() {
        let location = resolve(["SSL_CERT_FILE": "/missing.pem"], readable: Set(defaults), directories: ["/openssl/certs"])
        XCTAssertEqual(location.file, "/missing.pem")
        XCTAssertNil(location.directory)
    }

    func testWithoutVariablesTheFirstReadableDefaultFile() {
        XCTAssertEqual(resolve([:], readable: Set(defaults)).file, "/openssl/default.pem")
        XCTAssertEqual(resolve([:], readable: ["/distro/bundle.crt"]).file, "/distro/bundle.crt")
        XCTAssertEqual(resolve(["SSL_CERT_FILE": ""], readable: ["/distro/bundle.crt"]).file, "/distro/bundle.crt")
    }

    func testCertDirVariableAddsADirectory() {
        let location = resolve(["SSL_CERT_DIR": "/my/certs"], readable: Set(defaults))
        XCTAssertEqual(location, SystemTrustLocation(file: "/openssl/default.pem", directory: "/my/certs"))
        let both = resolve(["SSL_CERT_FILE": "/mine.pem", "SSL_CERT_DIR": "/my/certs"])
        XCTAssertEqual(both, SystemTrustLocation(file: "/mine.pem", directory: "/my/certs"))
    }

    func testDefaultDirectoryOnlyWithoutAnyFile() {
        XCTAssertEqual(resolve([:], directories: ["/openssl/certs"]), SystemTrustLocation(file: nil, directory: "/openssl/certs"))
        XCTAssertEqual(resolve([:]), SystemTrustLocation(file: nil, directory: nil))
        XCTAssertNil(resolve([:], readable: Set(defaults), directories: ["/openssl/certs"]).directory)
    }

    /// The store built from a location trusts exactly its roots: SSL_CERT_FILE naming the test
    /// root makes the test chain valid, and the location's certificates are those roots.
    func testStoreFollowsTheLocation() throws {
        let set = try SecurityTestHelpers.generated()
        let location = SystemTrustLocation.resolve(environment: ["SSL_CERT_FILE": set.root.certificatePEM.path])
        XCTAssertEqual(location.readableFile, set.root.certificatePEM.path)
        XCTAssertEqual(location.certificates(), [try SecurityTestHelpers.certificate(set.root.certificatePEM)])
        let store = try XCTUnwrap(TrustStore.load(location))
        XCTAssertEqual(store.certificateCount, 1)
        let verified = ChainVerifier.verify(try SecurityTestHelpers.trust(set.leaf), against: store, settings: .standalone)
        guard case .success(let chain) = verified else { return XCTFail("\(verified)") }
        XCTAssertEqual(chain.last, try SecurityTestHelpers.certificate(set.root.certificatePEM))

        let missing = SystemTrustLocation.resolve(environment: ["SSL_CERT_FILE": set.directory.appendingPathComponent("none.pem").path])
        XCTAssertNil(missing.readableFile)
        let empty = try XCTUnwrap(TrustStore.load(missing))
        XCTAssertEqual(empty.certificateCount, 0)
        XCTAssertTrue(empty.origin.contains("none.pem"), empty.origin)
    }

    /// A store's certificates are the very roots it was loaded from (no parse of their own),
    /// and this process's system roots are the location's, found either way.
    func testAStoresCertificatesAreItsRootsAndTheSystemsAreTheLocations() throws {
        let set = try SecurityTestHelpers.generated()
        let location = SystemTrustLocation.resolve(environment: ["SSL_CERT_FILE": set.root.certificatePEM.path])
        let store = try XCTUnwrap(TrustStore.load(location))
        XCTAssertEqual(store.certificates(), location.certificates())
        XCTAssertEqual(try XCTUnwrap(TrustStore(anchors: [], origin: "empty")).certificates(), [])

        let system = SystemTrustLocation.currentRootCertificates()
        XCTAssertEqual(Set(system), Set(SystemTrustLocation.current.certificates()))
        if SystemTrustLocation.current.readableFile != nil {
            XCTAssertFalse(system.isEmpty, "the machine's CA bundle has roots")
        }
    }

    /// A hashed directory names each root twice (the `<hash>.0` link and the file) and may hold
    /// the bundle itself: each real file is read once, and the roots come out once each.
    func testEachRealFileOfTheLocationIsReadOnce() throws {
        let set = try SecurityTestHelpers.generated()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-roots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let root = folder.appendingPathComponent("root.pem")
        try FileManager.default.copyItem(at: set.root.certificatePEM, to: root)
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("abcd1234.0").path, withDestinationPath: "root.pem")
        let bundle = folder.appendingPathComponent("bundle.crt")
        let pem = try Data(contentsOf: set.root.certificatePEM) + Data(contentsOf: set.leaf.certificatePEM)
        try pem.write(to: bundle)

        let location = SystemTrustLocation(file: bundle.path, directory: folder.path)
        // The bundle once (also a directory entry), the root once: by its first name in order.
        XCTAssertEqual(location.certificateFiles().map(\.lastPathComponent), ["bundle.crt", "abcd1234.0"])
        XCTAssertEqual(
            location.certificates(),
            [try SecurityTestHelpers.certificate(set.root.certificatePEM), try SecurityTestHelpers.certificate(set.leaf.certificatePEM)])
    }
}
