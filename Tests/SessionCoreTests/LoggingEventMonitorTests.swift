import CurlewTestSupport
import Foundation
import Logging
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `LoggingEventMonitor` and `SessionConfiguration.logger`: one info line per request, and no
/// secret in any line.
final class LoggingEventMonitorTests: XCTestCase {
    func testTheLogHasOneInfoLinePerRequestAndNoSecret() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/login") { _ in
            TestResponse(status: 200, headers: [("Set-Cookie", "sid=setcookie-secret; Path=/")], body: Data("welcome".utf8))
        }
        let lines = LogCapture()
        var logger = Logger(label: "test.curlew") { _ in CapturingLogHandler(capture: lines) }
        logger.logLevel = .debug
        var configuration = SessionConfiguration.default
        configuration.logger = logger  // the engine's own messages go to the same capture
        let manager = URLSessionManager.raw(configuration, eventMonitors: [
            LoggingEventMonitor(logger: logger, redactedQueryItems: ["api_key"]),
        ])
        var request = URLRequest(url: try server.url("/login?api_key=query-secret&page=2"))
        request.setValue("Bearer secret-token", forHTTPHeaderField: "Authorization")
        request.setValue("session=cookie-secret", forHTTPHeaderField: "Cookie")
        let response = await manager.response(for: request)
        XCTAssertEqual(response.response?.statusCode, 200)
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
        try await eventually({ lines.all.contains { $0.message.contains("manager invalidated") } }, "every line written")

        let all = lines.all
        let text = all.map(\.message).joined(separator: "\n")
        for secret in ["secret-token", "cookie-secret", "setcookie-secret", "query-secret"] {
            XCTAssertFalse(text.contains(secret), "\(secret) leaked into the log:\n\(text)")
        }
        let info = all.filter { $0.level == .info }
        XCTAssertEqual(info.count, 1, text)
        let line = try XCTUnwrap(info.first?.message)
        XCTAssertTrue(line.hasPrefix("GET http://"), line)
        XCTAssertTrue(line.contains("/login?api_key=***&page=2"), line)
        XCTAssertTrue(line.contains("→ 200, 7 bytes"), line)
        XCTAssertTrue(line.contains("HTTP/1.1"), line)
        XCTAssertTrue(line.contains("new connection"), line)
        // The details, secrets written as ***.
        XCTAssertTrue(text.contains("Authorization: ***"), text)
        XCTAssertTrue(text.contains("Cookie: ***"), text)
        XCTAssertTrue(text.contains("Set-Cookie: ***"), text)
        XCTAssertTrue(text.contains("started"), "the engine's own debug messages:\n\(text)")
    }

    /// Errors quote URLs: a retried 503's error names the response's URL, whose password and
    /// redacted query values went into the retry's line as they were (and a password escape
    /// that is not UTF-8 escaped the URL redaction too).
    func testAnErrorsTextCarriesNoSecretOfAURL() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.routeAnsweringFirst("/flaky", with: TestResponse(status: 503, body: Data("busy".utf8)), thenWith: .text("ok"))
        let lines = LogCapture()
        var logger = Logger(label: "test.curlew") { _ in CapturingLogHandler(capture: lines) }
        logger.logLevel = .debug
        let manager = URLSessionManager.raw(.default, eventMonitors: [
            LoggingEventMonitor(logger: logger, redactedQueryItems: ["api_key"]),
        ])
        manager.requestRetrier = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.01, jitter: 0)
        var components = try XCTUnwrap(URLComponents(url: try server.url("/flaky"), resolvingAgainstBaseURL: false))
        components.percentEncodedUser = "user"
        components.percentEncodedPassword = "p%E9ss-secret"
        components.percentEncodedQuery = "api_key=query-secret&page=2"
        let response = await manager.response(for: URLRequest(url: try XCTUnwrap(components.url)))
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
        try await eventually({ lines.all.contains { $0.message.contains("manager invalidated") } }, "every line written")
        let text = lines.all.map(\.message).joined(separator: "\n")
        XCTAssertTrue(text.contains("will retry"), text)
        for secret in ["p%E9ss-secret", "query-secret"] {
            XCTAssertFalse(text.contains(secret), "\(secret) leaked into the log:\n\(text)")
        }

        struct Quoting: Error, CustomStringConvertible {
            var description: String { "failed for https://u:pw-secret@h.test/x?a=1&API_KEY=k-secret#f and http://h.test/?api_key=v-secret" }
        }
        let scrubbed = LoggingEventMonitor(logger: logger, redactedQueryItems: ["api_key"]).scrub(Quoting())
        XCTAssertEqual(scrubbed, "failed for https://u:***@h.test/x?a=1&API_KEY=***#f and http://h.test/?api_key=***")
    }

    /// The engine's own messages name a connection slot's origin: with the URL's password in
    /// it, written as it was.
    func testTheEnginesOwnMessagesCarryNoPassword() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let gate = DispatchSemaphore(value: 0)
        server.route("/held") { _ in
            _ = gate.wait(timeout: .now() + 30)
            return .text("ok")
        }
        let lines = LogCapture()
        var logger = Logger(label: "test.curlew") { _ in CapturingLogHandler(capture: lines) }
        logger.logLevel = .debug
        var configuration = SessionConfiguration.default
        configuration.logger = logger
        configuration.httpMaximumConnectionsPerHost = 1
        let manager = URLSessionManager.raw(configuration)
        var components = try XCTUnwrap(URLComponents(url: try server.url("/held"), resolvingAgainstBaseURL: false))
        components.user = "user"
        components.password = "engine-secret"
        let url = try XCTUnwrap(components.url)
        async let first = manager.response(for: URLRequest(url: url))
        try await eventually({ server.requests.count == 1 }, "the first request holds the slot")
        async let second = manager.response(for: URLRequest(url: url))
        try await eventually({ lines.all.contains { $0.message.contains("waits for a connection slot") } }, "the wait is logged")
        gate.signal()
        gate.signal()
        _ = await (first, second)
        let text = lines.all.map(\.message).joined(separator: "\n")
        XCTAssertFalse(text.contains("engine-secret"), text)
        XCTAssertTrue(text.contains("user:***@"), text)
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testWithoutALoggerTheEngineIsSilent() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/ok", response: .text("ok"))
        let lines = LogCapture()
        var logger = Logger(label: "test.curlew") { _ in CapturingLogHandler(capture: lines) }
        logger.logLevel = .info  // the monitor's details are not written
        let manager = URLSessionManager.raw(.default, eventMonitors: [LoggingEventMonitor(logger: logger)])
        _ = await manager.response(for: URLRequest(url: try server.url("/ok")))
        manager.invalidateSessionCancelingTasks(false, resetSession: false)
        await manager.waitUntilInvalidated()
        try await eventually({ lines.all.count == 1 }, "one info line")
        XCTAssertEqual(lines.all.map(\.level), [.info])
    }
}

/// Log lines, kept in the order written.
final class LogCapture: Sendable {
    struct Line: Sendable {
        let level: Logger.Level
        let message: String
    }

    private let lines = Mutex<[Line]>([])
    var all: [Line] { lines.withLock { $0 } }
    func append(_ line: Line) { lines.withLock { $0.append(line) } }
}

/// A swift-log handler that keeps every line in a `LogCapture`.
struct CapturingLogHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        capture.append(LogCapture.Line(level: event.level, message: "\(event.message)"))
    }
}

extension URLSessionManager {
    /// `raw(_:)` with event monitors.
    static func raw(_ configuration: SessionConfiguration, eventMonitors: [any EventMonitor]) -> URLSessionManager {
        let manager = URLSessionManager(configuration: configuration, eventMonitors: eventMonitors)
        var serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(100..<600)
        serializer.acceptableContentTypes = nil
        manager.responseSerializer = serializer
        return manager
    }
}
