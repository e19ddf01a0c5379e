import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

extension XCTestCase {
    /// A manager and `count` data tasks for a port nothing listens on, not resumed: for tests
    /// of the tasks' identities, registry slots and notices rather than their transfers.
    /// Invalidate the manager when done.
    func makeUnsentTasks(_ count: Int) throws -> (URLSessionManager, [SessionTask]) {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        let manager = URLSessionManager.raw(configuration)
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:9/never-sent"))
        let tasks = (0..<count).map { _ in manager.dataTask(with: URLRequest(url: url), completionHandler: nil) as SessionTask }
        return (manager, tasks)
    }
}
