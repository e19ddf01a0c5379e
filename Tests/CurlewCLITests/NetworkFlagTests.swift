import Foundation
import XCTest
import CurlewTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `--proxy`, `--unix-socket` and `--http1.1` with the built binary.
final class NetworkFlagTests: XCTestCase {
    func testProxyReceivesTheAbsoluteURL() throws {
        let proxy = try TestServer { request in .text("proxied \(request.method) \(request.uri)") }
        defer { proxy.shutdown() }
        let result = try CurlewProcess.run(["--proxy", "http://127.0.0.1:\(proxy.port)", "http://origin.invalid/path?q=1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.text, "proxied GET http://origin.invalid/path?q=1")
    }

    func testTheReasonPhraseIsTheServersOwn() throws {
        let server = try TestServer { _ in
            var response = TestResponse.text("fine", status: 299)
            response.reason = "Quite Fine, Thanks"
            return response
        }
        defer { server.shutdown() }
        let result = try CurlewProcess.run(["--headers", "http://127.0.0.1:\(server.port)/"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.text.components(separatedBy: "\n").first, "HTTP/1.1 299 Quite Fine, Thanks")
    }

    func testUnixSocket() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let gunicorn = root.appendingPathComponent(".build/venv/bin/gunicorn")
        guard FileManager.default.isExecutableFile(atPath: gunicorn.path) else { throw XCTSkip("no httpbin venv at \(gunicorn.path)") }
        let directory = try CurlewProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("httpbin.sock").path
        let server = Process()
        server.executableURL = gunicorn
        server.arguments = ["--bind", "unix:\(socket)", "--workers", "1", "--log-level", "warning", "httpbin:app"]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        // Bounded wait for the socket to appear (gunicorn imports httpbin first).
        for _ in 0..<400 where !FileManager.default.fileExists(atPath: socket) { usleep(50_000) }
        let result = try CurlewProcess.run(["--unix-socket", socket, "http://through.socket/get", "a==1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let echoed = try XCTUnwrap(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any], result.text)
        XCTAssertEqual((echoed["headers"] as? [String: String])?["Host"], "through.socket")
        XCTAssertEqual(echoed["args"] as? [String: String], ["a": "1"])
    }

    func testHTTP1Flag() throws {
        let base = try CurlewProcess.httpbin()
        let result = try CurlewProcess.run(["--http1.1", "-v", "\(base)/get"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.text.contains("\nConnection: HTTP/1.1 to "), result.text)
        XCTAssertEqual(try CurlewProcess.run(["--http1.1", "--http2", "\(base)/get"]).status, 64)
    }
}
