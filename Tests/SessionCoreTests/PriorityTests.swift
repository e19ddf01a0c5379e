import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `SessionTask.priority` orders the transfers waiting for a connection to their host.
final class PriorityTests: XCTestCase {
    func testWaitingTransfersStartByPriorityThenInOrder() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/slow") { _ in
            var response = TestResponse.text("slow")
            response.delayBeforeHead = .milliseconds(500)
            return response
        }
        server.setDefaultHandler { request in .text(request.path) }
        var configuration = SessionConfiguration.default
        configuration.httpVersion = .http1_1
        configuration.httpMaximumConnectionsPerHost = 1
        let manager = URLSessionManager.raw(configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }

        let done = expectation(description: "all done")
        done.expectedFulfillmentCount = 6
        manager.dataTask(with: URLRequest(url: try server.url("/slow"))) { _ in done.fulfill() }.resume()
        XCTAssertTrue(server.waitForRequests(count: 1), "the one connection is busy")
        // Resumed in this order while the connection is busy; they start by priority.
        for (path, priority) in [("/low", Float(0.1)), ("/mid-a", 0.5), ("/high", 0.9), ("/mid-b", 0.5), ("/lowest", 0)] {
            let task = manager.dataTask(with: URLRequest(url: try server.url(path))) { _ in done.fulfill() }
            task.priority = priority
            task.resume()
        }
        await fulfillment(of: [done], timeout: 60)
        XCTAssertEqual(server.requests.map(\.path), ["/slow", "/high", "/mid-a", "/mid-b", "/low", "/lowest"])
    }
}
