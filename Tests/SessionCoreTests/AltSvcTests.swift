import CurlewTestSupport
import Foundation
import Security
import Serialization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Alt-Svc through libcurl's engine (`SessionConfiguration.alternativeServices`): server A
/// advertises server B (same name, other port) as its alternative; the next request for A's
/// origin is answered by B. Both are reached through a `resolve` override (libcurl ignores
/// Alt-Svc for an origin that a `connect` override routes).
final class AltSvcTests: XCTestCase {
    private let host = "alt.wild.test"
    private var first: TestServer!
    private var alternative: TestServer!

    override func setUpWithError() throws {
        let files = try TLSFixture.certificates().wildcardLeaf
        alternative = try TLSFixture.server(files) { _ in .text("alternative") }
        let port = alternative.port
        first = try TLSFixture.server(files, keepAlive: false) { _ in
            var response = TestResponse.text("origin")
            response.headers.append(("Alt-Svc", "h1=\":\(port)\"; ma=3600"))
            return response
        }
    }

    override func tearDown() {
        first.shutdown()
        alternative.shutdown()
    }

    private func bodies(_ services: SessionConfiguration.AlternativeServices) async throws -> [String?] {
        var configuration = SessionConfiguration.default
        configuration.httpVersion = .http1_1
        configuration.alternativeServices = services
        configuration.hostOverrides = [
            try .resolve(host, port: first.port, to: ["127.0.0.1"]),
            try .resolve(host, port: alternative.port, to: ["127.0.0.1"]),
        ]
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot(), configuration: configuration)
        var serializer = HTTPResponseSerializer()
        serializer.acceptableContentTypes = nil
        manager.responseSerializer = serializer
        var bodies: [String?] = []
        for _ in 0..<2 {
            let response = await manager.get(try XCTUnwrap(URL(string: "https://\(host):\(first.port)/")))
            bodies.append(response.data.map { String(decoding: $0, as: UTF8.self) })
        }
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        return bodies
    }

    func testAnAdvertisedAlternativeAnswersTheNextRequest() async throws {
        let answered = try await bodies(.inMemory)
        XCTAssertEqual(answered, ["origin", "alternative"])
    }

    func testTheCacheIsWrittenToItsFile() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-altsvc-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: file) }
        let answered = try await bodies(.file(file.path))
        XCTAssertEqual(answered, ["origin", "alternative"])
        let written = try String(contentsOf: file, encoding: .utf8)
        XCTAssertTrue(written.contains("h1 \(host) \(first.port) h1 \(host) \(alternative.port)"), written)
    }

    func testAltSvcIsIgnoredByDefault() async throws {
        let answered = try await bodies(.disabled)
        XCTAssertEqual(answered, ["origin", "origin"])
    }
}
