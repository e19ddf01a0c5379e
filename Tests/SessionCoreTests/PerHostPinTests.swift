import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `SessionConfiguration.pinningPolicy` in live handshakes against the in-process TLS server:
/// each rule of DESIGN.md's "Per-host pins", each host pattern, rotation with a backup pin,
/// expiry, report-only, and kept-alive connections and resumed sessions, which never carry a
/// request past a failing pin. (`*.localhost` names reach 127.0.0.1: libcurl resolves them
/// itself; their tests turn off the policy's host name check, which the certificate's names
/// would fail, to judge the pins alone.)
final class PerHostPinTests: XCTestCase {
    /// Collects reports, and whether each ran on the manager's report queue.
    final class Reports: Sendable {
        let received = Mutex<[(report: PinFailureReport, onReportQueue: Bool)]>([])
        static let queueKey = DispatchSpecificKey<Int>()

        var callback: @Sendable (PinFailureReport) -> Void {
            { report in
                let onQueue = DispatchQueue.getSpecific(key: Reports.queueKey) == 1
                self.received.withLock { $0.append((report, onQueue)) }
            }
        }

        /// The reports so far, once `manager`'s queue has run every report handed to it.
        func all(after manager: URLSessionManager) -> [PinFailureReport] {
            manager.engine.security.pinReportQueue.sync {}
            return received.withLock { $0.map(\.report) }
        }

        func allOnReportQueue() -> Bool { received.withLock { $0.allSatisfy(\.onReportQueue) } }
    }

    static func pin(_ files: TestCertificates.Files) throws -> String {
        PinSet.pin(of: try TLSFixture.certificate(files))
    }

    /// A manager trusting the test root (`validatesDomainName` as given) with these pins.
    static func manager(
        _ sets: [PinSet], reports: Reports? = nil, validatesDomainName: Bool = true, jar: CookieJar? = nil
    ) throws -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.pinningPolicy = PinningPolicy(pinSets: sets, report: reports?.callback)
        configuration.cookieJar = jar
        var policy = try TLSFixture.trustingTestRoot()
        policy.validatesDomainName = validatesDomainName
        let manager = TLSFixture.manager(policy: policy, configuration: configuration)
        manager.engine.security.pinReportQueue.setSpecific(key: Reports.queueKey, value: 1)
        return manager
    }

    static func url(_ server: TestServer, host: String = "localhost", _ path: String = "/x") throws -> URL {
        try XCTUnwrap(URL(string: "https://\(host):\(server.port)\(path)"))
    }

    /// Asserts a pin refusal made in the handshake: no request byte reached the server.
    private func assertPinRefused(
        _ response: DataResponse, _ server: TestServer, requestsBefore: Int = 0, file: StaticString = #filePath, line: UInt = #line
    ) {
        let failure = TLSFixture.trustFailure(response)
        XCTAssertEqual(failure?.reason, .noPinMatched, "\(response.result)", file: file, line: line)
        XCTAssertTrue(failure?.detail.contains("per-host pins") ?? false, "\(String(describing: failure))", file: file, line: line)
        XCTAssertEqual(server.requests.count, requestsBefore, file: file, line: line)
        if requestsBefore == 0 { XCTAssertEqual(server.recordedApplicationBytes, 0, file: file, line: line) }
    }

    private func assertAccepted(_ response: DataResponse, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)", file: file, line: line)
    }

    // MARK: - The rules

    func testAPinOfTheLeafAcceptsAndNoPinOfTheChainRefusesBeforeAnyByte() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let good = try Self.manager([PinSet(host: "localhost", pins: [try Self.pin(certificates.leaf)])])
        assertAccepted(await good.get(try Self.url(server)))
        await good.waitUntilInvalidatedAfterUse()
        let other = try Self.manager([PinSet(host: "localhost", pins: [try Self.pin(certificates.leafNewKey)])])
        let refused = await other.get(try Self.url(server))
        await other.waitUntilInvalidatedAfterUse()
        assertPinRefused(refused, server, requestsBefore: 1)
        XCTAssertEqual(other.engine.security.statistics.withLock { $0.refusedHandshakes }, 1)
    }

    /// The verified chain runs to the trust anchor: the root's pin counts although the server
    /// never sends the root, and so does the intermediate's.
    func testPinsOfTheIntermediateAndOfTheUnsentRootCount() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        for anchor in [certificates.root, certificates.intermediate] {
            let manager = try Self.manager([PinSet(host: "localhost", pins: [try Self.pin(anchor)])])
            assertAccepted(await manager.get(try Self.url(server)))
            await manager.waitUntilInvalidatedAfterUse()
        }
    }

    /// Pins add to the policy's trust, never replace it: a pinned key on an untrusted chain or
    /// for the wrong host is refused for the policy's reason, and no report is made.
    func testPinsNeverReplaceTrust() async throws {
        let certificates = try TLSFixture.certificates()
        let reports = Reports()
        for (files, reason) in [(certificates.unrelatedLeaf, TrustEvaluationError.Reason.unknownIssuer), (certificates.wrongHostLeaf, .hostMismatch)] {
            let server = try TLSFixture.server(files)
            defer { server.shutdown() }
            let manager = try Self.manager([PinSet(host: "localhost", pins: [try Self.pin(files)], reportOnly: false)], reports: reports)
            let response = await manager.get(try Self.url(server))
            await manager.waitUntilInvalidatedAfterUse()
            XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, reason, "\(response.result)")
            XCTAssertEqual(server.requests.count, 0)
            XCTAssertTrue(reports.all(after: manager).isEmpty)
        }
    }

    func testAHostNoSetMatchesIsJudgedByThePolicyAlone() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let reports = Reports()
        let manager = try Self.manager([PinSet(host: "example.com", pins: [try Self.pin(certificates.leafNewKey)], includeSubdomains: true)], reports: reports)
        assertAccepted(await manager.get(try Self.url(server)))
        await manager.waitUntilInvalidatedAfterUse()
        XCTAssertTrue(reports.all(after: manager).isEmpty)
    }

    func testAMalformedPinMatchesNothing() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let digest = try TLSFixture.certificate(certificates.leaf).publicKeySHA256
        // The right key in curl's spelling and without a prefix: neither is a pin.
        let manager = try Self.manager([PinSet(host: "localhost", pins: ["sha256//" + digest, digest])])
        let refused = await manager.get(try Self.url(server))
        await manager.waitUntilInvalidatedAfterUse()
        assertPinRefused(refused, server)
    }

    /// A challenge handler is never asked to overrule a pin, and a leaf it trusted in the
    /// policy's place still has to pass the pins.
    func testAChallengeHandlerCannotOverruleAPin() async throws {
        let certificates = try TLSFixture.certificates()
        let calls = Mutex(0)
        let handler: @Sendable (SessionTask, URLAuthenticationChallenge) -> AuthChallengeDisposition = { _, _ in
            calls.withLock { $0 += 1 }
            return .useCredential(URLCredential(user: "", password: "", persistence: .none))
        }
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let pinned = try Self.manager([PinSet(host: "127.0.0.1", pins: [try Self.pin(certificates.leafNewKey)])])
        pinned.setAuthenticationChallengeHandler(handler)
        assertPinRefused(await pinned.get(try server.url("/x")), server)
        await pinned.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(calls.withLock { $0 }, 0, "a pin refusal is not a challenge")

        // The policy refuses a self-signed server, the handler trusts its leaf: the pins still judge it.
        let selfSigned = try TLSFixture.server(certificates.selfSigned)
        defer { selfSigned.shutdown() }
        for (pins, accepted) in [([try Self.pin(certificates.leaf)], false), ([try Self.pin(certificates.selfSigned)], true)] {
            calls.withLock { $0 = 0 }
            let manager = try Self.manager([PinSet(host: "127.0.0.1", pins: Set(pins))])
            manager.setAuthenticationChallengeHandler(handler)
            let response = await manager.get(try selfSigned.url("/x"))
            await manager.waitUntilInvalidatedAfterUse()
            if accepted {
                assertAccepted(response)
            } else {
                XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .noPinMatched, "\(response.result)")
            }
            XCTAssertEqual(calls.withLock { $0 }, 1, "asked once, about the policy's refusal")
        }
        XCTAssertEqual(selfSigned.requests.count, 1)
    }

    /// A pin on a CA binds no host: a certificate that CA issued to another host
    /// (`wrong.example.com`) met `localhost`'s pin on the intermediate once a challenge handler
    /// trusted it and the host name check was waived with the policy. Under a host's enforced
    /// pins the name still must match; for a host without pins the handler's word stands.
    func testAHandlerCannotWaiveTheHostNameOfAPinnedHost() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.wrongHostLeaf)
        defer { server.shutdown() }
        let calls = Mutex(0)
        let handler: @Sendable (SessionTask, URLAuthenticationChallenge) -> AuthChallengeDisposition = { _, _ in
            calls.withLock { $0 += 1 }
            return .useCredential(URLCredential(user: "", password: "", persistence: .none))
        }
        let pinned = try Self.manager([PinSet(host: "localhost", pins: [try Self.pin(certificates.intermediate)])])
        pinned.setAuthenticationChallengeHandler(handler)
        let refused = await pinned.get(try Self.url(server, host: "localhost"))
        await pinned.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .hostMismatch, "\(refused.result)")
        XCTAssertEqual(server.requests.count, 0, "the request reached another host's certificate")
        XCTAssertEqual(calls.withLock { $0 }, 1, "asked about the policy's refusal")

        // Report-only pins and pins of another host leave the decision to the handler.
        for sets in [[PinSet(host: "localhost", pins: [try Self.pin(certificates.intermediate)], reportOnly: true)],
                     [PinSet(host: "other.test", pins: [try Self.pin(certificates.intermediate)])]] {
            let manager = try Self.manager(sets)
            manager.setAuthenticationChallengeHandler(handler)
            assertAccepted(await manager.get(try Self.url(server, host: "localhost")))
            await manager.waitUntilInvalidatedAfterUse()
        }
    }

    /// The handler trusts an impostor's self-signed leaf that comes with the real site's root
    /// attached (a public certificate anyone can send): a pin on that root is not met by it.
    /// The pins judged every certificate the server sent, signed by anyone or not.
    func testAnAttachedCertificateDoesNotMeetAPinForATrustedLeaf() async throws {
        let certificates = try TLSFixture.certificates()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-attached-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let chain = folder.appendingPathComponent("chain.pem")
        try (try Data(contentsOf: certificates.selfSigned.certificatePEM) + Data(contentsOf: certificates.root.certificatePEM))
            .write(to: chain)
        let impostor = try TestServer(
            tls: TestServerTLS(certificateChain: chain, privateKey: certificates.selfSigned.privateKeyPEM),
            handler: { _ in .json("{\"ok\":true}") })
        defer { impostor.shutdown() }
        let calls = Mutex(0)
        let manager = try Self.manager([PinSet(host: "127.0.0.1", pins: [try Self.pin(certificates.root)])])
        manager.setAuthenticationChallengeHandler { _, _ in
            calls.withLock { $0 += 1 }
            return .useCredential(URLCredential(user: "", password: "", persistence: .none))
        }
        let response = await manager.get(try impostor.url("/x"))
        await manager.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(calls.withLock { $0 }, 1, "the handler trusted the leaf")
        XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .noPinMatched, "\(response.result)")
        XCTAssertEqual(impostor.requests.count, 0)
    }

    // MARK: - Host patterns

    /// Exact names compare case-insensitively and without a trailing dot; an IP address pin
    /// set covers that address only, never the name that resolves to it.
    func testExactNamesAndAddresses() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let wrong = try Self.pin(certificates.leafNewKey)
        let byName = try Self.manager([PinSet(host: "LocalHost.", pins: [wrong])])
        assertPinRefused(await byName.get(try Self.url(server, host: "localhost")), server)
        assertAccepted(await byName.get(try Self.url(server, host: "127.0.0.1")))
        await byName.waitUntilInvalidatedAfterUse()
        let byAddress = try Self.manager([PinSet(host: "127.0.0.1", pins: [wrong], includeSubdomains: true)])
        assertPinRefused(await byAddress.get(try Self.url(server, host: "127.0.0.1")), server, requestsBefore: 1)
        assertAccepted(await byAddress.get(try Self.url(server, host: "localhost")))
        await byAddress.waitUntilInvalidatedAfterUse()
    }

    /// libcurl connects to 127.0.0.1 for each of these hosts: the pins set for that address
    /// apply to every way of writing it (they were skipped, the handshake accepted).
    func testAnAddressWrittenInAnotherFormIsJudgedByItsAddressesPins() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let wrong = try Self.pin(certificates.leafNewKey)
        let manager = try Self.manager([PinSet(host: "127.0.0.1", pins: [wrong])], validatesDomainName: false)
        for host in ["2130706433", "127.1", "0x7f.0.0.1", "0177.0.0.1"] {
            assertPinRefused(await manager.get(try Self.url(server, host: host)), server)
        }
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// A redirect to another host is judged by that host's pins, on the same manager and its
    /// pooled handle: each hop's host and port for the TLS policy come from its own URL
    /// (`PreparedRequest.tlsTarget`), and the handle's TLS options are set again for it.
    func testARedirectToAnotherHostIsJudgedByThatHostsPins() async throws {
        let certificates = try TLSFixture.certificates()
        let target = try TLSFixture.server(certificates.leaf)
        defer { target.shutdown() }
        let landing = try Self.url(target, host: "127.0.0.1", "/landed").absoluteString
        let origin = try TLSFixture.server(certificates.leaf) { _ in .redirect(to: landing) }
        defer { origin.shutdown() }
        let wrong = try Self.pin(certificates.leafNewKey)
        let manager = try Self.manager([PinSet(host: "127.0.0.1", pins: [wrong])])
        assertPinRefused(await manager.get(try Self.url(origin, host: "localhost", "/hop")), target)
        XCTAssertEqual(origin.requests.map(\.path), ["/hop"], "the first hop, to a host without pins, went through")
        // Straight to the pinned host, then to the unpinned one again: each judged as itself.
        assertPinRefused(await manager.get(try XCTUnwrap(URL(string: landing))), target)
        assertAccepted(await manager.get(try Self.url(target, host: "localhost", "/direct")))
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// `*.localhost`: one label only; `**.localhost`: any depth, not the base; an exact host
    /// with `includeSubdomains`: the host and everything below it.
    func testWildcardPatternsAndSubdomains() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let wrong = try Self.pin(certificates.leafNewKey)
        let cases: [(pattern: String, subdomains: Bool, refused: [String], accepted: [String])] = [
            ("*.localhost", false, ["a.localhost", "B.LocalHost"], ["a.b.localhost", "localhost"]),
            ("**.localhost", false, ["a.localhost", "a.b.c.localhost"], ["localhost"]),
            ("localhost", true, ["localhost", "a.b.localhost"], ["127.0.0.1"]),
            ("a.localhost", false, ["a.localhost"], ["b.a.localhost", "localhost"]),
        ]
        for entry in cases {
            let manager = try Self.manager([PinSet(host: entry.pattern, pins: [wrong], includeSubdomains: entry.subdomains)], validatesDomainName: false)
            for host in entry.refused {
                let response = await manager.get(try Self.url(server, host: host))
                XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .noPinMatched, "\(entry.pattern) must cover \(host): \(response.result)")
            }
            for host in entry.accepted {
                let response = await manager.get(try Self.url(server, host: host))
                XCTAssertTrue(TLSFixture.isSuccess(response), "\(entry.pattern) must not cover \(host): \(response.result)")
            }
            await manager.waitUntilInvalidatedAfterUse()
        }
    }

    /// Several matching sets: their pins are united, the chain needs one of them.
    func testMatchingSetsAreUnited() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let manager = try Self.manager([
            PinSet(host: "**.localhost", pins: [try Self.pin(certificates.leafNewKey)]),
            PinSet(host: "api.localhost", pins: [try Self.pin(certificates.leaf)]),
        ], validatesDomainName: false)
        assertAccepted(await manager.get(try Self.url(server, host: "api.localhost")))
        let refused = await manager.get(try Self.url(server, host: "www.localhost"))
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(refused.result)")
        await manager.waitUntilInvalidatedAfterUse()
    }

    // MARK: - Rotation and expiry

    /// The backup key, pinned beside the current one, lets the server move to it without an
    /// app update; a key in neither place is refused.
    func testRotationToTheBackupPin() async throws {
        let certificates = try TLSFixture.certificates()
        let set = PinSet(host: "localhost", pins: [try Self.pin(certificates.leaf), try Self.pin(certificates.leafNewKey)])
        for files in [certificates.leaf, certificates.reissuedLeafSameKey, certificates.leafNewKey] {
            let server = try TLSFixture.server(files)
            defer { server.shutdown() }
            let manager = try Self.manager([set])
            assertAccepted(await manager.get(try Self.url(server)))
            await manager.waitUntilInvalidatedAfterUse()
        }
        // Control: without the backup, the rotated key is refused.
        let server = try TLSFixture.server(certificates.leafNewKey)
        defer { server.shutdown() }
        let manager = try Self.manager([PinSet(host: "localhost", pins: [try Self.pin(certificates.leaf)])])
        assertPinRefused(await manager.get(try Self.url(server)), server)
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// An expired set is neither enforced nor reported; one that expires later still is.
    func testAnExpiredSetStopsBeingEnforcedAndReported() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let wrong = try Self.pin(certificates.leafNewKey)
        let reports = Reports()
        let expired = try Self.manager([PinSet(host: "localhost", pins: [wrong], expires: Date(timeIntervalSinceNow: -60))], reports: reports)
        assertAccepted(await expired.get(try Self.url(server)))
        await expired.waitUntilInvalidatedAfterUse()
        XCTAssertTrue(reports.all(after: expired).isEmpty, "an expired set is never reported")
        let current = try Self.manager([PinSet(host: "localhost", pins: [wrong], expires: Date(timeIntervalSinceNow: 3600))], reports: reports)
        assertPinRefused(await current.get(try Self.url(server)), server, requestsBefore: 1)
        await current.waitUntilInvalidatedAfterUse()
        XCTAssertEqual(reports.all(after: current).count, 1)
    }
}
