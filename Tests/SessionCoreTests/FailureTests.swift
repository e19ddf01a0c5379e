import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Serialization
@testable import SessionCore

/// Each failure has its own clear error; bad input never reaches the wire.
final class FailureTests: XCTestCase {
    var manager: URLSessionManager!

    override func setUp() { manager = URLSessionManager.raw() }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    func testConnectionRefusedIsCannotConnect() async throws {
        let port = try LoopbackPort.closed()
        let response = await manager.response(for: URLRequest(url: URL(string: "http://127.0.0.1:\(port)/")!))
        guard case .cannotConnect(let message)? = response.error as? SessionError else {
            return XCTFail("expected cannotConnect, got \(String(describing: response.error))")
        }
        XCTAssertFalse(message.isEmpty)
    }

    func testUnresolvableHostIsDNSFailure() async throws {
        let response = await manager.response(for: URLRequest(url: URL(string: "http://curlew-does-not-exist.invalid/")!))
        guard case .dnsFailure? = response.error as? SessionError else {
            return XCTFail("expected dnsFailure, got \(String(describing: response.error))")
        }
    }

    func testCancelOfSlowRequestCompletesPromptlyWithCancelled() async throws {
        // "Promptly" is an ordering, not a stopwatch: a twin request, started first and never
        // cancelled, must still be waiting for the server's answer when the cancelled task has
        // completed. A cancel that waited for the response would complete after the twin.
        let twin = manager.dataTask(with: URLRequest(url: try Peer.url("/delay/10"))) { _ in }
        twin.resume()
        let task = manager.dataTask(with: URLRequest(url: try Peer.url("/delay/10"))) { _ in }
        let completed = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        try await Task.sleep(nanoseconds: 200_000_000)
        task.cancel()
        // The driver may already have completed it: either state is right, never `.running`.
        XCTAssertTrue([.canceling, .completed].contains(task.state), "\(task.state)")
        await fulfillment(of: [completed], timeout: 30)
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual(task.error as? SessionError, .cancelled)
        XCTAssertEqual(twin.state, .running, "the cancel waited for the response: \(String(describing: twin.error))")
    }

    func testSwiftTaskCancellationCancelsTheTransfer() async throws {
        let request = URLRequest(url: try Peer.url("/delay/5"))
        let call = Task { [manager] in try await manager!.data(for: request) }
        try await Task.sleep(nanoseconds: 200_000_000)
        await assertCancelling(call)
    }

    func testCancelBeforeResumeCompletesWithCancelledAndSendsNothing() async throws {
        let response: DataResponse = await withCheckedContinuation { continuation in
            let task = manager.dataTask(with: URLRequest(url: URL(string: "http://127.0.0.1:9/")!)) {
                continuation.resume(returning: $0)
            }
            task.cancel()
            task.resume()  // no effect after cancel
        }
        XCTAssertEqual(response.error as? SessionError, .cancelled)
        XCTAssertNil(response.metrics)
    }

    func testBadInputIsAnErrorNeverARequest() async throws {
        let listener = try LoopbackListener()
        let base = "http://127.0.0.1:\(listener.port)"
        func request(_ url: String, _ change: (inout URLRequest) -> Void = { _ in }) -> URLRequest {
            var request = URLRequest(url: URL(string: url) ?? URL(fileURLWithPath: "/"))
            change(&request)
            return request
        }
        let cases: [(name: String, request: URLRequest, expected: String)] = [
            ("CR/LF header", request(base + "/a") { $0.allHTTPHeaderFields = ["X-Injected": "a\r\nX-Evil: yes"] }, "invalidHeader"),
            ("LF header", request(base + "/b") { $0.allHTTPHeaderFields = ["X-Injected": "a\nb"] }, "invalidHeader"),
            ("NUL header", request(base + "/b") { $0.allHTTPHeaderFields = ["X-Injected": "a\u{0}b"] }, "invalidHeader"),
            ("header name with space", request(base + "/c") { $0.allHTTPHeaderFields = ["Bad Name": "x"] }, "invalidHeader"),
            ("ftp scheme", request("ftp://127.0.0.1:\(listener.port)/f"), "unsupportedScheme"),
            ("file scheme", URLRequest(url: URL(fileURLWithPath: "/etc/passwd")), "unsupportedScheme"),
            ("no host", request("http:///path"), "badURL"),
            ("port without a host", request("http://:80/path"), "badURL"),
            ("host that does not decode", request("http://%FF/path"), "badURL"),
            ("no URL", request(base) { $0.url = nil }, "badURL"),
            ("method with space", request(base + "/d") { $0.httpMethod = "GE T" }, "badURL"),
        ]
        for (name, request, expected) in cases {
            let response = await manager.response(for: request)
            guard let error = response.error as? SessionError else {
                XCTFail("\(name): expected a SessionError, got \(String(describing: response.error))")
                continue
            }
            XCTAssertEqual(caseName(of: error), expected, "\(name): \(error)")
        }
        XCTAssertEqual(listener.acceptedConnections(), 0, "bad input reached the wire")
    }

    /// The engine applies the same RFC 9110 value rule as the serializers: C0 controls other
    /// than tab, and DEL, are refused before anything is sent; a tab goes out unchanged.
    func testControlCharactersInHeaderValuesAreRefusedButTabIsSent() async throws {
        let listener = try LoopbackListener()
        for bad in ["a\u{1}b", "a\u{8}b", "a\u{B}b", "a\u{1B}b", "a\u{1F}b", "a\u{7F}b"] {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(listener.port)/x")!)
            request.timeoutInterval = 2  // if the header went out, give up soon: nothing answers
            request.allHTTPHeaderFields = ["X-Control": bad]
            let response = await manager.response(for: request)
            guard case .invalidHeader? = response.error as? SessionError else {
                XCTFail("\(bad.debugDescription): expected invalidHeader, got \(String(describing: response.error))")
                continue
            }
        }
        XCTAssertEqual(listener.acceptedConnections(), 0, "a control character reached the wire")

        var request = URLRequest(url: try Peer.url("/headers"))
        request.allHTTPHeaderFields = ["X-Tab": "a\tb"]
        let response = await manager.response(for: request)
        XCTAssertNil(response.error)
        let headers = try XCTUnwrap(try json(response.data)["headers"] as? [String: String])
        XCTAssertEqual(headers["X-Tab"], "a\tb")
    }

    /// The engine and the serializers refuse exactly the same header names, values and methods:
    /// one rule (`HTTPHeaderValidation`), checked here byte by byte through both. (URLs share
    /// it too, but Foundation percent-encodes a raw space or control in `URL(string:)`, so a
    /// `URL` never reaches the engine with one.)
    func testEngineAndSerializersShareOneRuleForHeadersAndMethods() throws {
        let serializer = HTTPRequestSerializer()
        var refusedValues = 0
        for byte in UInt8(0)..<UInt8(0x80) {
            let character = String(UnicodeScalar(byte))
            var request = URLRequest(url: URL(string: "http://127.0.0.1/")!)
            request.allHTTPHeaderFields = ["X-Probe": "a\(character)b", "X\(character)Name": "v"]
            XCTAssertEqual((try? PreparedRequest.prepare(request, configuration: .default)) == nil,
                           (try? serializer.request(bySerializing: request, parameters: nil)) == nil,
                           "header byte \(byte)")
            if (try? PreparedRequest.validateHeader(name: "X-Probe", value: "a\(character)b")) == nil {
                refusedValues += 1
            }

            let method = "GE\(character)T"
            request = URLRequest(url: URL(string: "http://127.0.0.1/")!)
            request.httpMethod = method
            XCTAssertEqual((try? PreparedRequest.prepare(request, configuration: .default)) == nil,
                           (try? serializer.request(method: method, urlString: "http://127.0.0.1/", parameters: nil)) == nil,
                           "method byte \(byte)")
        }
        // NUL, 0x01–0x08, LF, VT, FF, CR, 0x0E–0x1F and DEL; tab and everything visible pass.
        XCTAssertEqual(refusedValues, 32)
    }

    func testTasksCreatedAfterInvalidationFailWithSessionInvalidated() async throws {
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
        let response = await manager.response(for: URLRequest(url: try Peer.url("/get")))
        XCTAssertEqual(response.error as? SessionError, .sessionInvalidated)
    }
}
