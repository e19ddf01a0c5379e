import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The connection cap per origin (`httpMaximumConnectionsPerHost`) when many origins come and
/// go: idle origins stay in the driver's table up to `HostAdmission.idleOriginsKept`, then the
/// idle ones are swept out. A busy origin must survive every sweep, or the transfers waiting
/// for it would be let through past the cap, in arrival order instead of by priority.
final class HostAdmissionTests: XCTestCase {
    func testABusyOriginKeepsItsCapAndItsLineThroughSweepsOfIdleOrigins() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        // Holds its connection until cancelled: a first chunk now, the rest in ten minutes.
        server.route("/hold", response: TestResponse(
            status: 200,
            body: .stream([.init(Data("first".utf8)), .init(Data("never".utf8), delay: .seconds(600))])))
        server.setDefaultHandler { request in .text(request.path) }

        let others = HostAdmission.idleOriginsKept + 16
        var configuration = SessionConfiguration.default
        configuration.httpVersion = .http1_1
        configuration.httpMaximumConnectionsPerHost = 1
        configuration.hostOverrides = try (0...others).map {
            try HostOverride.resolve("origin-\($0).admission.test", port: server.port, to: ["127.0.0.1"])
        }
        let manager = URLSessionManager.raw(configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        func url(_ origin: Int, _ path: String) throws -> URL {
            try XCTUnwrap(URL(string: "http://origin-\(origin).admission.test:\(server.port)\(path)"))
        }

        let held = manager.dataTask(with: URLRequest(url: try url(0, "/hold"))) { _ in }
        held.resume()
        XCTAssertTrue(server.waitForRequests(count: 1), "origin 0's one slot is taken")
        // More origins than the table keeps idle, one after another: sweeps run meanwhile.
        for origin in 1...others {
            let response = try await manager.dataResponse(for: URLRequest(url: try url(origin, "/visit")))
            XCTAssertEqual(response.response?.statusCode, 200, "origin \(origin): \(response.result)")
        }
        // Still busy, so these wait in origin 0's line, and start by priority when it frees.
        let done = expectation(description: "the waiting transfers ran")
        done.expectedFulfillmentCount = 3
        for (path, priority) in [("/low", Float(0.1)), ("/mid", 0.5), ("/high", 0.9)] {
            let task = manager.dataTask(with: URLRequest(url: try url(0, path))) { _ in done.fulfill() }
            task.priority = priority
            task.resume()
        }
        held.cancel()
        await fulfillment(of: [done], timeout: 60)
        let origin0 = server.requests.filter { ["/hold", "/low", "/mid", "/high"].contains($0.path) }.map(\.path)
        XCTAssertEqual(origin0, ["/hold", "/high", "/mid", "/low"])
    }
}
