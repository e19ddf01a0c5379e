import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Parallel requests to one cleartext host run in parallel, on parallel connections:
/// `CURLOPT_PIPEWAIT` made each wait for the previous response head (12 s for four
/// `/delay/3` instead of 3 s).
final class ParallelRequestTests: XCTestCase {
    func testParallelRequestsToOneCleartextHostAllReachTheServerAtOnce() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/hold") { _ in .fault(.acceptAndNeverRespond) }  // answers nothing, ever
        let manager = URLSessionManager.raw()
        var tasks: [DataTask] = []
        for _ in 0..<4 {
            let task = manager.dataTask(with: URLRequest(url: try server.url("/hold"))) { _ in }
            tasks.append(task)
            task.resume()
        }
        // None of them can have had an answer, so all four must be on the wire together.
        XCTAssertTrue(server.waitForRequests(count: 4, timeout: .seconds(20)), "only \(server.requests.count) of 4 arrived")
        XCTAssertEqual(server.acceptedConnectionCount, 4)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        XCTAssertTrue(tasks.allSatisfy { $0.error as? SessionError == .cancelled })
    }

    /// A completion handler that invalidates its own manager: every bystander had reached
    /// the server and is cancelled, none is lost.
    func testInvalidatingFromACompletionHandlerCancelsEveryBystander() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/hold") { _ in .fault(.acceptAndNeverRespond) }
        server.route("/quick", response: .text("ok"))
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 0
        let manager = URLSessionManager.raw(configuration)
        let outcomes = Mutex<[SessionError?]>([])
        let bystandersDone = expectation(description: "bystanders")
        bystandersDone.expectedFulfillmentCount = 10
        for _ in 0..<10 {
            manager.dataTask(with: URLRequest(url: try server.url("/hold"))) { response in
                outcomes.withLock { $0.append(response.error as? SessionError) }
                bystandersDone.fulfill()
            }.resume()
        }
        XCTAssertTrue(server.waitForRequests(count: 10, timeout: .seconds(20)), "only \(server.requests.count) of 10 bystanders arrived")
        let invalidated = expectation(description: "invalidated")
        manager.setSessionDidBecomeInvalidBlock { _ in invalidated.fulfill() }
        manager.dataTask(with: URLRequest(url: try server.url("/quick"))) { [manager] _ in
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
        }.resume()
        await fulfillment(of: [bystandersDone, invalidated], timeout: 30)
        XCTAssertEqual(outcomes.withLock { $0 }, Array(repeating: .cancelled, count: 10))
    }
}
