import CurlewTestSupport
import Dispatch
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A streamed response (`bytes(for:)`) that the data-received hook also sees: the hook's
/// copies wait on the operation queue, and a hook that is behind holds the transfer back as a
/// consumer that is behind does. Without that, a fast consumer and a slow hook queued the
/// whole body in memory, one copy per chunk.
final class StreamHookBackpressureTests: XCTestCase {
    func testASlowDataHookHoldsTheStreamBack() async throws {
        let server = try TestServer()
        let manager = URLSessionManager.raw()
        // 32 MiB: a block of 65,521 bytes (a prime, so no chunk boundary lines up with it) again and again.
        let block = Data((0..<65_521).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        var body = Data(capacity: 32 << 20)
        while body.count < 32 << 20 { body.append(block) }
        server.route("/large", response: TestResponse(status: 200, body: body))
        let release = DispatchSemaphore(value: 0)
        let hooked = Mutex(0)
        manager.setDataTaskDidReceiveDataBlock { _, chunk in
            // The first copy waits for the test: the hook is behind from its first chunk on.
            if hooked.withLock({ count in defer { count += chunk.count }; return count == 0 }) { release.wait() }
        }
        let bufferSize = 256 << 10
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/large")), bufferSize: bufferSize)
        let read = Mutex(0)
        let reader = Task {
            var received = Data()
            for try await chunk in bytes {
                received.append(chunk)
                read.withLock { $0 = received.count }
            }
            return received
        }
        // Not an assertion on time: the time for a consumer with no hold to read far more
        // than the bound (the whole 32 MiB, over loopback).
        try await Task.sleep(nanoseconds: 500_000_000)
        let readWhileTheHookWaited = read.withLock { $0 }
        release.signal()
        let received = try await reader.value
        XCTAssertLessThanOrEqual(readWhileTheHookWaited, 4 * bufferSize, "the stream ran on while the hook's copies queued up")
        XCTAssertTrue(received == body, "the stream's bytes differ")
        // The hook's copies run on the operation queue after the chunks reached the stream.
        await withCheckedContinuation { continuation in manager.operationQueue.async { continuation.resume() } }
        XCTAssertEqual(hooked.withLock { $0 }, body.count, "the hook saw another body")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        server.shutdown()
    }
}
