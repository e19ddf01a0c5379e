import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A chunked body whose trailer libcurl refuses (a line without a colon: its header store
/// fails the transfer). Whether libcurl wrote the trailer at once or kept it in its pause
/// buffer (a stream whose consumer is behind) and handed it over later, the task ends the
/// same way: a refusal in that hand-over was taken for "no connection yet" and dropped, and
/// the body ended as if whole.
final class FaultTrailerTests: XCTestCase {
    private var server: TestServer!
    private var manager: URLSessionManager!

    override func setUp() async throws {
        server = try TestServer()
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        manager = URLSessionManager.raw(configuration)
        // The chunked framing written by hand (sent as is, then the connection closes).
        // 40 KB: body and trailer come in one read, which a 16 KiB stream pauses in.
        let body = String(repeating: "x", count: 40_000)
        let framed = String(body.count, radix: 16) + "\r\n" + body + "\r\n0\r\nNoColonHere\r\n\r\n"
        server.route("/trailer", response: TestResponse(
            status: 200, headers: [("Transfer-Encoding", "chunked")], body: .data(Data(framed.utf8)),
            framing: .closeDelimited))
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        server.shutdown()
    }

    func testARefusedTrailerFailsTheTask() async throws {
        let response = await manager.response(for: URLRequest(url: try server.url("/trailer")))
        assertRefused((response.error, response.data?.count ?? 0), streamed: false)
    }

    func testARefusedTrailerKeptDuringAPauseFailsTheTaskTheSameWay() async throws {
        let (bytes, _) = try await manager.bytes(for: URLRequest(url: try server.url("/trailer")), bufferSize: 16 << 10)
        try await Task.sleep(nanoseconds: 300_000_000)  // not an assertion: the stream fills
        var received = 0
        do {
            for try await chunk in bytes { received += chunk.count }
            assertRefused((nil, received), streamed: true)
        } catch {
            assertRefused((error, received), streamed: true)
        }
    }

    private func assertRefused(
        _ outcome: (error: Error?, bytes: Int), streamed: Bool, file: StaticString = #filePath, line: UInt = #line
    ) {
        guard case .curl(let code, _)? = outcome.error as? SessionError else {
            return XCTFail("expected libcurl's refusal of the trailer, got \(String(describing: outcome.error))", file: file, line: line)
        }
        XCTAssertEqual(code, 43, file: file, line: line)  // CURLE_BAD_FUNCTION_ARGUMENT, from its header store
        // A failed task hands over no collected body; a stream has delivered what came before.
        XCTAssertEqual(outcome.bytes, streamed ? 40_000 : 0, file: file, line: line)
    }
}
