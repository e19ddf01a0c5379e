import CurlewTestSupport
import Foundation
import Security
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// HSTS through libcurl's engine (`SessionConfiguration.strictTransportSecurity`): a TLS
/// server for `hsts.wild.test` (the lab's `*.wild.test` leaf) sends
/// `Strict-Transport-Security`, and `http://hsts.wild.test/` must then go to it over https
/// while a plain listener for the same name sees no connection at all. Both listeners are
/// reached through `connect` host overrides (port 443 and port 80 of the name).
final class HSTSTests: XCTestCase {
    private let host = "hsts.wild.test"
    private var tls: TestServer!
    private var plain: TestServer!
    /// The `Strict-Transport-Security` value the TLS server sends (nil: none).
    private let header = HeaderValue()
    private var directory: URL!

    override func setUpWithError() throws {
        let header = self.header
        tls = try TLSFixture.server(try TLSFixture.certificates().wildcardLeaf) { _ in
            var response = TestResponse.text("tls")
            if let value = header.value.withLock({ $0 }) { response.headers.append(("Strict-Transport-Security", value)) }
            return response
        }
        plain = try TestServer { _ in .text("plain") }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-hsts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        tls.shutdown()
        plain.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }

    private func manager(
        _ hsts: SessionConfiguration.StrictTransportSecurity, cookies: Bool = true, policy: SecurityPolicy? = nil,
        pins: PinningPolicy? = nil, cache: ResponseCache? = nil
    ) throws -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.responseCache = cache
        configuration.pinningPolicy = pins
        configuration.strictTransportSecurity = hsts
        configuration.httpShouldSetCookies = cookies
        configuration.hostOverrides = [
            try .connect(host, port: 443, to: "127.0.0.1", port: tls.port),
            try .connect(host, port: 80, to: "127.0.0.1", port: plain.port),
        ]
        let manager = TLSFixture.manager(policy: try policy ?? TLSFixture.trustingTestRoot(), configuration: configuration)
        var serializer = HTTPResponseSerializer()
        serializer.acceptableContentTypes = nil
        manager.responseSerializer = serializer
        return manager
    }

    private func get(_ manager: URLSessionManager, _ url: String) async throws -> (DataResponse, String?) {
        let response = await manager.get(try XCTUnwrap(URL(string: url)))
        return (response, response.data.map { String(decoding: $0, as: UTF8.self) })
    }

    private func assertUpgrades(cookies: Bool) async throws {
        let manager = try manager(.inMemory, cookies: cookies)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (first, firstBody) = try await get(manager, "https://\(host)/")
        XCTAssertEqual(firstBody, "tls", "\(first.result)")
        let (upgraded, body) = try await get(manager, "http://\(host)/page")
        XCTAssertEqual(body, "tls", "http:// went out as https:// (\(upgraded.result))")
        XCTAssertEqual(plain.acceptedConnectionCount, 0, "no byte went out in the clear")
        XCTAssertEqual(tls.requests.last?.path, "/page")
    }

    func testAnHTTPURLToAnHSTSHostIsSentOverHTTPS() async throws {
        try await assertUpgrades(cookies: true)  // the cache in the manager's own jar's share
    }

    func testTheUpgradeWorksWithoutACookieJar() async throws {
        try await assertUpgrades(cookies: false)  // the cache in the driver's own share
    }

    func testMaxAgeZeroEndsTheUpgrade() async throws {
        let manager = try manager(.inMemory)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        _ = try await get(manager, "https://\(host)/")
        let (_, upgraded) = try await get(manager, "http://\(host)/")
        XCTAssertEqual(upgraded, "tls")
        // RFC 6797 6.1.1: max-age=0 makes the host no longer a known HSTS host.
        header.value.withLock { $0 = "max-age=0" }
        _ = try await get(manager, "https://\(host)/")
        let (response, body) = try await get(manager, "http://\(host)/")
        XCTAssertEqual(body, "plain", "\(response.result)")
        XCTAssertEqual(plain.acceptedConnectionCount, 1)
    }

    /// An `http://` answer that came in the clear, before the host was known for HSTS, is not
    /// kept in the response cache: once the host is known, the same URL goes over TLS. It was
    /// stored under the trust the upgraded request is looked up with, and answered it: a
    /// page anyone on the path could have written, after the host asked for TLS only.
    func testAnAnswerInTheClearDoesNotAnswerTheUpgradedRequestFromTheCache() async throws {
        plain.shutdown()
        plain = try TestServer { _ in TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data("plain".utf8)) }
        header.value.withLock { $0 = "max-age=31536000" }
        let manager = try manager(.inMemory, cache: ResponseCache())
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (_, before) = try await get(manager, "http://\(host)/x")
        XCTAssertEqual(before, "plain", "not known yet: sent as written")
        _ = try await get(manager, "https://\(host)/")
        let (response, after) = try await get(manager, "http://\(host)/x")
        XCTAssertEqual(after, "tls", "\(response.result)")
        XCTAssertEqual(plain.requests.count, 1)
        XCTAssertEqual(tls.requests.last?.path, "/x")
    }

    func testWithoutHSTSTheURLIsSentAsWritten() async throws {
        let manager = try manager(.disabled)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        _ = try await get(manager, "https://\(host)/")
        let (response, body) = try await get(manager, "http://\(host)/")
        XCTAssertEqual(body, "plain", "\(response.result)")
    }

    /// A host known from the HSTS file is upgraded from the first request, and the upgraded
    /// handshake is judged by the manager's security policy like any https request: here the
    /// system roots, which do not trust the lab's root, so the request is refused before any
    /// byte of it is sent, and nothing reaches the plain listener.
    func testAnUpgradeFromTheFileIsCheckedByTheSecurityPolicy() async throws {
        let file = directory.appendingPathComponent("hsts.txt")
        try Data("# test\n\(host) \"20351231 00:00:00\"\n".utf8).write(to: file)
        let manager = try manager(.file(file.path), policy: .default)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (response, _) = try await get(manager, "http://\(host)/")
        XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .unknownIssuer, "\(response.result)")
        XCTAssertEqual(plain.acceptedConnectionCount, 0)
        XCTAssertEqual(tls.requests.count, 0)
    }

    /// Two features meeting: a request that HSTS upgrades is held to the per-host pins like
    /// any https request. The host is known from the file; its pin set names another key, so
    /// the upgraded handshake is refused and nothing reaches either listener; with the
    /// served key's pin it goes through.
    func testAnUpgradedRequestIsHeldToThePerHostPins() async throws {
        let file = directory.appendingPathComponent("hsts-pins.txt")
        try Data("\(host) \"20351231 00:00:00\"\n".utf8).write(to: file)
        let certificates = try TLSFixture.certificates()
        let otherKey = PinSet.pin(of: try TLSFixture.certificate(certificates.leafNewKey))
        let servedKey = PinSet.pin(of: try TLSFixture.certificate(certificates.wildcardLeaf))

        let refusing = try manager(.file(file.path), pins: PinningPolicy(pinSets: [PinSet(host: "*.wild.test", pins: [otherKey])]))
        let (refused, _) = try await get(refusing, "http://\(host)/")
        refusing.invalidateSessionCancelingTasks(true, resetSession: false)
        await refusing.waitUntilInvalidated()
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .noPinMatched, "\(refused.result)")
        XCTAssertEqual(plain.acceptedConnectionCount, 0, "no byte in the clear")
        XCTAssertEqual(tls.requests.count, 0, "no request byte to a host whose pin failed")

        let accepting = try manager(.file(file.path), pins: PinningPolicy(pinSets: [PinSet(host: "*.wild.test", pins: [servedKey])]))
        defer { accepting.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (accepted, body) = try await get(accepting, "http://\(host)/")
        XCTAssertEqual(body, "tls", "\(accepted.result)")
        XCTAssertEqual(plain.acceptedConnectionCount, 0)
    }

    func testTheCacheIsWrittenToItsFile() async throws {
        let file = directory.appendingPathComponent("written.txt")
        let manager = try manager(.file(file.path))
        let (response, body) = try await get(manager, "https://\(host)/")
        XCTAssertEqual(body, "tls", "\(response.result)")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        let written = try String(contentsOf: file, encoding: .utf8)
        XCTAssertTrue(written.contains("\(host) \""), written)
    }
}

/// The header value shared with the server's handler.
private final class HeaderValue: Sendable {
    let value = Mutex<String?>("max-age=3600")
}

extension HSTSTests {
    /// libcurl 7.88 cannot share an HSTS cache between threads: a manager given another HSTS
    /// manager's own jar fails its tasks with a typed error instead of racing on the cache.
    func testAnHSTSManagersJarCannotBeHandedToAnotherManager() async throws {
        let owner = try manager(.inMemory)
        defer { owner.invalidateSessionCancelingTasks(true, resetSession: false) }
        _ = try await get(owner, "https://\(host)/")
        var configuration = SessionConfiguration.default
        configuration.cookieJar = owner.cookieJar
        configuration.proxy = .none
        let second = URLSessionManager.raw(configuration)
        defer { second.invalidateSessionCancelingTasks(true, resetSession: false) }
        let response = await second.get(try XCTUnwrap(URL(string: "http://127.0.0.1:\(plain.port)/")))
        guard case .invalidConfiguration? = response.error as? SessionError else {
            return XCTFail("expected invalidConfiguration, got \(response.result)")
        }
        XCTAssertEqual(plain.acceptedConnectionCount, 0)
    }
}
