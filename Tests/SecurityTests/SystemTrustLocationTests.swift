import CurlewTestSupport
import Foundation
@testable import Security
import Synchronization
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

    /// OpenSSL's default directory beside the default file (as `X509_STORE_set_default_paths`
    /// has both), but never beside a file `SSL_CERT_FILE` named.
    func testDefaultDirectoryUnlessTheFileWasNamed() {
        XCTAssertEqual(resolve([:], directories: ["/openssl/certs"]), SystemTrustLocation(file: nil, directory: "/openssl/certs"))
        XCTAssertEqual(resolve([:]), SystemTrustLocation(file: nil, directory: nil))
        XCTAssertEqual(
            resolve([:], readable: Set(defaults), directories: ["/openssl/certs"]),
            SystemTrustLocation(file: "/openssl/default.pem", directory: "/openssl/certs"))
        XCTAssertNil(resolve(["SSL_CERT_FILE": "/mine.pem"], readable: ["/mine.pem"], directories: ["/openssl/certs"]).directory)
        XCTAssertEqual(
            resolve(["SSL_CERT_DIR": "/my/certs"], readable: Set(defaults), directories: ["/openssl/certs"]).directory, "/my/certs")
    }

    /// The store built from a location trusts exactly its roots: SSL_CERT_FILE naming the test
    /// root makes the test chain valid, and the location's certificates are those roots.
    func testStoreFollowsTheLocation() throws {
        let set = try SecurityTestHelpers.generated()
        let location = SystemTrustLocation.resolve(environment: ["SSL_CERT_FILE": set.root.certificatePEM.path])
        XCTAssertEqual(location.readableFile, set.root.certificatePEM.path)
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

    /// A policy that falls back to the system's roots (a manager's `certificateAuthorityFile`)
    /// verifies against its own roots first and asks for the system store only when they
    /// refuse the chain: a server chained to the file's root never makes the process parse
    /// the system's roots. Here the "system" store is one loaded from a location naming the
    /// test root, so both ways are seen accepting.
    func testAFallbackToTheSystemRootsIsAskedOnlyWhenThePolicysOwnRootsRefuse() throws {
        let set = try SecurityTestHelpers.generated()
        let system = try XCTUnwrap(TrustStore.load(SystemTrustLocation(file: set.root.certificatePEM.path, directory: nil)))
        let asked = Mutex(0)
        let unrelatedRoot = try SecurityTestHelpers.certificate(set.unrelatedRoot.certificatePEM)
        var policy = SecurityPolicy(pinningMode: .none)
        policy.trustedRootCertificates = [unrelatedRoot]
        policy.anchors = PolicyAnchors(pinned: [], roots: [unrelatedRoot]) {
            asked.withLock { $0 += 1 }
            return system
        }

        assertAccepted(policy, try SecurityTestHelpers.trust(set.unrelatedLeaf), domain: "localhost")
        XCTAssertEqual(asked.withLock { $0 }, 0, "the policy's own root verified the chain")
        assertAccepted(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost")
        XCTAssertGreaterThan(asked.withLock { $0 }, 0)
        // The refusal that says more is kept: the expired leaf reached the fallback's root.
        assertRefused(policy, try SecurityTestHelpers.trust(set.expiredLeaf), domain: "localhost", reason: .expired)

        // Without the fallback the same chain has an unknown issuer.
        policy.anchors = PolicyAnchors(pinned: [], roots: [unrelatedRoot])
        assertRefused(policy, try SecurityTestHelpers.trust(set.leaf), domain: "localhost", reason: .unknownIssuer)
        // And the other way round: the policy's root reached and the leaf expired there; the
        // fallback's unknown issuer does not hide it.
        let testRoot = try SecurityTestHelpers.certificate(set.root.certificatePEM)
        let unrelated = try XCTUnwrap(TrustStore(anchors: [unrelatedRoot], origin: "unrelated"))
        policy.anchors = PolicyAnchors(pinned: [], roots: [testRoot]) { unrelated }
        assertRefused(policy, try SecurityTestHelpers.trust(set.expiredLeaf), domain: "localhost", reason: .expired)
    }

    /// The setting itself: part of equality, ignored without roots of the policy's own (the
    /// system store is then the only store), and the process's system store is the fallback.
    func testFallingBackToTheSystemRootsIsASettingOfThePolicy() throws {
        var policy = SecurityPolicy(pinningMode: .none)
        policy.fallsBackToSystemRoots = true
        XCTAssertNil(policy.anchors.fallback, "no roots of its own: the system store already decides")
        policy.trustedRootCertificates = [try SecurityTestHelpers.certificate(try SecurityTestHelpers.generated().root.certificatePEM)]
        let fallback = try XCTUnwrap(policy.anchors.fallback)
        XCTAssertTrue(fallback() === TrustStore.system)
        var without = policy
        without.fallsBackToSystemRoots = false
        XCTAssertNotEqual(policy, without)
        XCTAssertNil(without.anchors.fallback)
    }
}
