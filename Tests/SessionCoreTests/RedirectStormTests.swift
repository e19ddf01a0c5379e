import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A long redirect chain bouncing between two origins (two loopback servers): followed to its
/// end when the limit allows it, refused with `tooManyRedirects` at the limit otherwise, and
/// the task is released either way.
final class RedirectStormTests: XCTestCase {
    private var left: TestServer!
    private var right: TestServer!

    override func setUp() async throws {
        left = try TestServer()
        right = try TestServer()
        // /hop/N on one server sends to /hop/N-1 on the other; /hop/0 answers.
        for (here, there) in [(left!, right!), (right!, left!)] {
            let other = there.baseURLString
            here.setDefaultHandler { request in
                guard request.path.hasPrefix("/hop/"), let remaining = Int(request.path.dropFirst(5)), remaining >= 0 else {
                    return .text("no such hop", status: 404)
                }
                return remaining == 0 ? .text("arrived") : .redirect(to: "\(other)/hop/\(remaining - 1)")
            }
        }
    }

    override func tearDown() async throws {
        left.shutdown()
        right.shutdown()
    }

    private func run(hops: Int, maximumRedirects: Int?) async throws -> (DataResponse, WeakBox<DataTask>, URLSessionManager) {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        if let maximumRedirects { configuration.maximumRedirects = maximumRedirects }
        let manager = URLSessionManager.raw(configuration)
        let request = URLRequest(url: try left.url("/hop/\(hops)"))
        var weakTask: WeakBox<DataTask>?
        let response: DataResponse = await withCheckedContinuation { continuation in
            let task = manager.dataTask(with: request) { continuation.resume(returning: $0) }
            weakTask = WeakBox(task)
            task.resume()
        }
        return (response, try XCTUnwrap(weakTask), manager)
    }

    func testAThousandRedirectsBetweenTwoHostsArriveWhenTheLimitAllowsThem() async throws {
        let (response, weakTask, manager) = try await run(hops: 1000, maximumRedirects: 1000)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        XCTAssertNil(response.error)
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(response.data.map { String(decoding: $0, as: UTF8.self) }, "arrived")
        XCTAssertEqual(response.metrics?.redirectCount, 1000)
        XCTAssertEqual(left.requests.count + right.requests.count, 1001)
        XCTAssertEqual(left.requests.count, 501, "the chain bounced between the two origins")
        // Each origin's connection is reused hop after hop: no connection per hop.
        XCTAssertLessThanOrEqual(left.acceptedConnectionCount + right.acceptedConnectionCount, 4)
        try await eventually({ weakTask.value == nil }, "the finished task is still alive")
        try await eventually({ manager.tasks.isEmpty }, "the task stayed in the manager")
    }

    func testAThousandRedirectsFailAtTheDefaultLimit() async throws {
        let (response, weakTask, manager) = try await run(hops: 1000, maximumRedirects: nil)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let limit = SessionConfiguration.default.maximumRedirects
        XCTAssertEqual(response.error as? SessionError, .tooManyRedirects(limit))
        XCTAssertEqual(left.requests.count + right.requests.count, limit + 1, "the chain stopped at the limit")
        try await eventually({ weakTask.value == nil }, "the failed task is still alive")
        try await eventually({ manager.tasks.isEmpty }, "the task stayed in the manager")
    }

    /// One hop short of the limit still arrives; the limit counts redirects, not requests.
    func testAChainOfExactlyTheLimitArrives() async throws {
        let (response, _, manager) = try await run(hops: 1000, maximumRedirects: 999)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        XCTAssertEqual(response.error as? SessionError, .tooManyRedirects(999))
        let (arrived, _, second) = try await run(hops: 999, maximumRedirects: 999)
        defer { second.invalidateSessionCancelingTasks(true, resetSession: false) }
        XCTAssertNil(arrived.error)
        XCTAssertEqual(arrived.metrics?.redirectCount, 999)
    }
}
