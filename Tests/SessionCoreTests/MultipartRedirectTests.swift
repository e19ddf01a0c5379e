import CurlewTestSupport
import Foundation
import Serialization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A 307/308 keeps method and body: a streamed multipart body is rebuilt and sent again.
final class MultipartRedirectTests: XCTestCase {
    func testTemporaryRedirectResendsTheWholeMultipartBody() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/upload", response: .redirect(to: "/stored", status: 307))
        server.route("/stored") { request in .json("{\"bytes\": \(request.body.count)}") }

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-redirect-\(UUID().uuidString).bin")
        try Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        let manager = HTTPSessionManager(baseURL: server.baseURL)
        let outcome: Result<(any Sendable)?, any Error> = await withCheckedContinuation { continuation in
            let task = manager.post(
                "upload", parameters: ["note": "twice"], headers: nil,
                constructingBodyWith: { form in try form.appendPart(withFileURL: file, name: "file") },
                progress: nil,
                success: { _, value in continuation.resume(returning: .success(value)) },
                failure: { _, error in continuation.resume(returning: .failure(error)) })
            XCTAssertNotNil(task)
        }
        let value = try outcome.get()
        XCTAssertEqual((value as? JSONValue)?["bytes"]?.intValue, server.requests.first?.body.count)

        let requests = server.requests
        XCTAssertEqual(requests.map(\.path), ["/upload", "/stored"])
        XCTAssertEqual(requests.map(\.method), ["POST", "POST"])
        XCTAssertGreaterThan(requests[0].body.count, 300_000)
        XCTAssertEqual(requests[1].body, requests[0].body, "the redirected request must carry the same body")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
