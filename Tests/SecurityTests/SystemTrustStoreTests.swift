import COpenSSL
import CurlewTestSupport
import Foundation
@testable import Security
import Synchronization
import XCTest

/// The system store as `TrustStore.system` builds it: the location's hashed directory first,
/// read on demand, and every root of the location (the bundle parsed) only for a chain the
/// directory cannot anchor.
final class SystemTrustStoreTests: XCTestCase {
    /// A location like Debian's: a hashed directory holding the test root (one `<hash>.0`
    /// file, as `c_rehash` makes) and a bundle file holding it and the unrelated root.
    private struct Fixture {
        let location: SystemTrustLocation
        let set: TestCertificates
    }

    private func fixture() throws -> Fixture {
        let set = try SecurityTestHelpers.generated()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-trust-\(UUID().uuidString)")
        let directory = folder.appendingPathComponent("certs")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        let root = try SecurityTestHelpers.certificate(set.root.certificatePEM)
        let hash = String(format: "%08lx", X509_subject_name_hash(root.handle.pointer))
        try FileManager.default.copyItem(at: set.root.certificatePEM, to: directory.appendingPathComponent("\(hash).0"))
        let bundle = folder.appendingPathComponent("bundle.pem")
        let pem = try Data(contentsOf: set.root.certificatePEM) + Data(contentsOf: set.unrelatedRoot.certificatePEM)
        try pem.write(to: bundle)
        return Fixture(location: SystemTrustLocation(file: bundle.path, directory: directory.path), set: set)
    }

    /// How often a complete store was asked for.
    private final class Asked: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func note() { count.withLock { $0 += 1 } }
    }

    /// A store for `location` that counts in `asked` how often its complete store was asked for.
    private func onDemandStore(_ location: SystemTrustLocation, asked: Asked) throws -> TrustStore {
        let complete = try XCTUnwrap(TrustStore.load(location))
        return try XCTUnwrap(TrustStore.onDemand(location) {
            asked.note()
            return complete
        })
    }

    /// `files`' chain verified against `store`, as a handshake would.
    private func verify(_ files: TestCertificates.Files, against store: TrustStore) throws -> Result<[Certificate], TrustEvaluationError> {
        ChainVerifier.verify(try SecurityTestHelpers.trust(files), against: store, settings: .standalone)
    }

    func testAChainTheDirectoryAnchorsNeverParsesTheBundle() throws {
        let (fixture, asked) = (try fixture(), Asked())
        let store = try onDemandStore(fixture.location, asked: asked)
        XCTAssertNotNil(store.wider)
        XCTAssertEqual(store.certificateCount, 0, "nothing is parsed before a chain asks")

        for _ in 0..<2 {
            let verified = try verify(fixture.set.leaf, against: store)
            guard case .success(let chain) = verified else { return XCTFail("\(verified)") }
            XCTAssertEqual(chain.last, try SecurityTestHelpers.certificate(fixture.set.root.certificatePEM))
        }
        XCTAssertEqual(asked.value, 0, "the directory's root verified the chain")
    }

    func testAChainOnlyTheBundleAnchorsIsVerifiedAgainstEveryRoot() throws {
        let (fixture, asked) = (try fixture(), Asked())
        let store = try onDemandStore(fixture.location, asked: asked)
        let verified = try verify(fixture.set.unrelatedLeaf, against: store)
        guard case .success(let chain) = verified else { return XCTFail("\(verified)") }
        XCTAssertEqual(chain.last, try SecurityTestHelpers.certificate(fixture.set.unrelatedRoot.certificatePEM))
        XCTAssertEqual(asked.value, 1)
    }

    /// A refusal is the complete store's: its reason, and its roots named in the message.
    func testARefusalIsTheCompleteStoresVerdict() throws {
        let (fixture, asked) = (try fixture(), Asked())
        let store = try onDemandStore(fixture.location, asked: asked)
        let expired = try verify(fixture.set.expiredLeaf, against: store)
        guard case .failure(let refusal) = expired else { return XCTFail("an expired leaf was accepted") }
        XCTAssertEqual(refusal.reason, TrustEvaluationError.Reason.expired)
        XCTAssertEqual(asked.value, 1)

        let stranger = try verify(fixture.set.selfSigned, against: store)
        guard case .failure(let unknown) = stranger else { return XCTFail("a self-signed leaf was accepted") }
        XCTAssertTrue(unknown.detail.contains("bundle.pem"), unknown.detail)
        XCTAssertEqual(asked.value, 2)
    }

    /// Only a location with both a file and a directory is split: a file alone must be
    /// parsed, a directory alone is read on demand anyway.
    func testOnlyAFileWithADirectoryIsReadOnDemand() throws {
        let fixture = try fixture()
        let asked = Asked()
        for location in [
            SystemTrustLocation(file: fixture.location.file, directory: nil),
            SystemTrustLocation(file: nil, directory: fixture.location.directory),
        ] {
            let complete = try XCTUnwrap(TrustStore.load(location))
            let store = try XCTUnwrap(TrustStore.onDemand(location) {
                asked.note()
                return complete
            })
            XCTAssertTrue(store === complete)
            XCTAssertNil(store.wider)
        }
        XCTAssertEqual(asked.value, 2)
    }

    /// Where two features meet: a manager's CA file (the policy's own roots, falling back to
    /// the system's) and public-key pins, with the system store read on demand. A chain the
    /// file's roots refuse goes to the directory and is accepted there, pins still decide,
    /// and the refusal that says more (expired) is kept over the file's unknown issuer.
    func testACAFileAndPinsOverTheDirectoryFirstSystemStore() throws {
        let (fixture, asked) = (try fixture(), Asked())
        let system = try onDemandStore(fixture.location, asked: asked)
        let fileRoot = try SecurityTestHelpers.certificate(fixture.set.unrelatedRoot.certificatePEM)
        let leaf = try SecurityTestHelpers.certificate(fixture.set.leaf.certificatePEM)
        let otherKey = try SecurityTestHelpers.certificate(fixture.set.leafNewKey.certificatePEM)

        var policy = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [leaf])
        policy.trustedRootCertificates = [fileRoot]
        policy.anchors = PolicyAnchors(pinned: [leaf], roots: [fileRoot]) { system }
        assertAccepted(policy, try SecurityTestHelpers.trust(fixture.set.leaf), domain: "localhost")
        XCTAssertEqual(asked.value, 0, "the directory anchored the chain the file refused")
        assertRefused(policy, try SecurityTestHelpers.trust(fixture.set.expiredLeaf), domain: "localhost", reason: .expired)

        var otherPin = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [otherKey])
        otherPin.trustedRootCertificates = [fileRoot]
        otherPin.anchors = PolicyAnchors(pinned: [otherKey], roots: [fileRoot]) { system }
        assertRefused(otherPin, try SecurityTestHelpers.trust(fixture.set.leaf), domain: "localhost", reason: .noPinMatched)
    }
}
