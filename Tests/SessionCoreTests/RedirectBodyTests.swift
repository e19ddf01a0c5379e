import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// A 307/308 keeps the method and the body: every kind of body goes along, byte for byte,
/// or the task fails clearly; it never sends an empty body and reports success.
final class RedirectBodyTests: XCTestCase {
    var manager: URLSessionManager!

    override func setUp() { manager = URLSessionManager.raw() }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    /// 140,000 bytes of printable text, so httpbin echoes them as a string.
    private let body = Data((0..<140_000).map { UInt8(ascii: "a") + UInt8($0 % 26) })

    /// `body` in a temporary file, removed when the test ends.
    private func bodyFile() throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-redirect-\(UUID().uuidString)")
        try body.write(to: file)
        addTeardownBlock { try? FileManager.default.removeItem(at: file) }
        return file
    }

    /// httpbin's `/redirect-to` answers before it reads the upload, with `Connection:
    /// keep-alive`; gunicorn 27 then drains at most 64 KiB of the unread body and closes the
    /// connection. The follow-up PUT, sent at once on that kept-alive connection, can lose it
    /// while its body is being written (seen under TSan and on one core: "Send failure: Broken
    /// pipe" after 131,226 bytes, no answer). The engine sends such a request once more on a
    /// new connection (`DriverLoop.lostReusedConnection`); these tests keep that server.
    private func redirectingPut(status: Int) throws -> URLRequest {
        var request = URLRequest(url: try Peer.url("/redirect-to?url=/anything&status_code=\(status)"))
        request.httpMethod = "PUT"
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        return request
    }

    private func assertEchoed(_ response: DataResponse, method: String = "PUT", file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertNil(response.error, file: file, line: line)
        XCTAssertEqual(response.response?.statusCode, 200, file: file, line: line)
        XCTAssertEqual(response.metrics?.redirectCount, 1, file: file, line: line)
        let echo = try json(response.data)
        XCTAssertEqual(echo["method"] as? String, method, file: file, line: line)
        let data = try XCTUnwrap(echo["data"] as? String, file: file, line: line)
        XCTAssertEqual(data.utf8.count, body.count, "bytes received after the redirect", file: file, line: line)
        XCTAssertEqual(Data(data.utf8), body, file: file, line: line)
    }

    func testAFileUploadKeepsItsBodyAcross307And308() async throws {
        let file = try bodyFile()
        for status in [307, 308] {
            let request = try redirectingPut(status: status)
            let response: DataResponse = await withCheckedContinuation { continuation in
                manager.uploadTask(with: request, fromFile: file) { continuation.resume(returning: $0) }.resume()
            }
            try assertEchoed(response)
        }
    }

    /// Over 1 MiB curl would add `Expect: 100-continue` and wait for the server's answer;
    /// Curlew suppresses it for a file's body, after the redirect too (where the next
    /// `URLRequest` carries no body of its own). The in-process server reads each body whole
    /// before it answers (httpbin answers a redirect early and closes, which breaks the send).
    func testALargeFileUploadSendsNoExpectBeforeOrAfterA307() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/moved", response: .redirect(to: "/target", status: 307))
        server.route("/target") { request in
            let expect = request.headers.first { $0.name.lowercased() == "expect" }?.value ?? "none"
            return .text("expect=\(expect) bytes=\(request.body.count)")
        }
        let large = Data((0..<1_500_000).map { UInt8(ascii: "a") + UInt8($0 % 26) })
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-expect-\(UUID().uuidString)")
        try large.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var request = URLRequest(url: try server.url("/moved"))
        request.httpMethod = "PUT"
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, fromFile: file) { continuation.resume(returning: $0) }.resume()
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(response.metrics?.redirectCount, 1)
        XCTAssertEqual(response.data.map { String(decoding: $0, as: UTF8.self) }, "expect=none bytes=1500000")
        let sawExpect = server.requests.contains { request in request.headers.contains { $0.name.lowercased() == "expect" } }
        XCTAssertFalse(sawExpect, "neither request asked for 100-continue")
    }

    func testADataUploadKeepsItsBodyAcross307() async throws {
        let request = try redirectingPut(status: 307)
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, from: body) { continuation.resume(returning: $0) }.resume()
        }
        try assertEchoed(response)
    }

    func testARedirectionHookThatReturnsTheProposedRequestKeepsTheFileBody() async throws {
        manager.setTaskWillPerformHTTPRedirectionBlock { _, _, proposed in proposed }
        let file = try bodyFile()
        let request = try redirectingPut(status: 308)
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, fromFile: file) { continuation.resume(returning: $0) }.resume()
        }
        try assertEchoed(response)
    }

    func testA303AfterAFileUploadBecomesAGetWithoutBody() async throws {
        let file = try bodyFile()
        let request = try redirectingPut(status: 303)
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(with: request, fromFile: file) { continuation.resume(returning: $0) }.resume()
        }
        XCTAssertNil(response.error)
        let echo = try json(response.data)
        XCTAssertEqual(echo["method"] as? String, "GET")
        XCTAssertEqual(echo["data"] as? String, "")
    }

    /// A caller's stream is spent once sent: a 307 that needs it again fails clearly.
    func testAStreamThatCannotBeReplayedFailsInsteadOfSendingAnEmptyBody() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/moved", response: .redirect(to: "/target", status: 307))
        server.route("/target") { request in .text("got \(request.body.count)") }
        var request = URLRequest(url: try server.url("/moved"))
        request.httpMethod = "PUT"
        request.httpBodyStream = InputStream(data: body)
        request.setValue("\(body.count)", forHTTPHeaderField: "Content-Length")
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(withStreamedRequest: request) { continuation.resume(returning: $0) }.resume()
        }
        guard case .bodyStreamFailed? = response.error as? SessionError else {
            return XCTFail("expected bodyStreamFailed, got \(String(describing: response.error)) \(String(describing: response.response?.statusCode))")
        }
        XCTAssertFalse(server.requests.contains { $0.path == "/target" }, "a request went out without its body")
    }

    /// A redirection hook that keeps a 303's POST with the original request (AFNetworking's
    /// recipe) hands the hop the very stream the first request read: a second reader read what
    /// was left beside the first one's pump, and the server took nothing for the body. It fails
    /// clearly instead, and nothing goes out without its body.
    func testAHookThatKeepsAPostOnA303CannotReuseASpentStream() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/moved", response: .redirect(to: "/target", status: 303))
        server.route("/target") { request in .text("got \(request.body.count)") }
        manager.setTaskWillPerformHTTPRedirectionBlock { task, _, proposed in
            var kept = task.originalRequest ?? proposed
            kept.url = proposed.url
            return kept
        }
        var request = URLRequest(url: try server.url("/moved"))
        request.httpMethod = "POST"
        request.httpBodyStream = InputStream(data: body)
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(withStreamedRequest: request) { continuation.resume(returning: $0) }.resume()
        }
        guard case .bodyStreamFailed? = response.error as? SessionError else {
            return XCTFail("expected bodyStreamFailed, got \(String(describing: response.error)) \(String(describing: response.response?.statusCode))")
        }
        XCTAssertFalse(server.requests.contains { $0.path == "/target" }, "a request went out without its body")
    }
}
