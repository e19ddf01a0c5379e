import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The driver thread as the system sees it.
final class DriverThreadTests: XCTestCase {
    /// `top -H`, crash reports and the monitors' "never on the driver thread" check read the
    /// kernel's thread name: the driver's must be there, not its creator's.
    func testTheKernelKnowsTheDriverThreadByItsName() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/ok", response: .text("ok"))
        let manager = URLSessionManager.raw()
        let response = await manager.response(for: URLRequest(url: try server.url("/ok")))
        XCTAssertNil(response.error)
        let driver = try XCTUnwrap(manager.engine.driver)
        let thread = try XCTUnwrap(driver.threadID.withLock { $0 }, "the driver thread reported its id")
        let file = open("/proc/self/task/\(thread)/comm", O_RDONLY | O_CLOEXEC)  // Foundation reads /proc as empty
        XCTAssertGreaterThanOrEqual(file, 0)
        defer { close(file) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(file, &buffer, buffer.count)
        let name = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(name, "curlew.drv.\(driver.identifier)")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
    }
}
