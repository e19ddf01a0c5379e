import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import CurlewTestSupport
import Serialization
@testable import SessionCore

/// The httpbin peer: `CURLEW_HTTPBIN_URL` (set by Scripts/test.sh), or one started from
/// `.build/venv` for this test process (`CurlewTestSupport.HTTPBin`).
enum Peer {
    static var httpbin: URL {
        get throws { try HTTPBin.baseURL }
    }

    static func url(_ path: String) throws -> URL {
        guard let url = URL(string: path, relativeTo: try httpbin) else { throw SessionError.badURL(path) }
        return url.absoluteURL
    }
}

extension URLSessionManager {
    /// Runs a data task to completion and returns its response (test helper).
    func response(for request: URLRequest, timeout: TimeInterval = 30) async -> DataResponse {
        await withCheckedContinuation { continuation in
            dataTask(with: request, completionHandler: { continuation.resume(returning: $0) }).resume()
        }
    }
}

/// Parses httpbin's JSON echo.
func json(_ data: Data?) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: data ?? Data())
    guard let dictionary = object as? [String: Any] else { throw SessionError.badServerResponse("not an object") }
    return dictionary
}

/// The case name of an enum value with or without payload ("invalidHeader", "cancelled").
func caseName(of value: some Any) -> String {
    Mirror(reflecting: value).children.first?.label ?? String(describing: value)
}

extension URLSessionManager {
    /// A manager whose results are the raw body (`HTTPResponseSerializer` accepting any
    /// status): for tests of the transport, not of serialization.
    static func raw(_ configuration: SessionConfiguration = .default) -> URLSessionManager {
        let manager = URLSessionManager(configuration: configuration)
        var serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(100..<600)
        serializer.acceptableContentTypes = nil
        manager.responseSerializer = serializer
        return manager
    }
}

/// Cancels `call` (a Swift `Task` running a Curlew request) and asserts that it ends with
/// `SessionError.cancelled`.
func assertCancelling<T: Sendable>(_ call: Task<T, any Error>, file: StaticString = #filePath, line: UInt = #line) async {
    call.cancel()
    do {
        _ = try await call.value
        XCTFail("expected cancellation", file: file, line: line)
    } catch {
        XCTAssertEqual(error as? SessionError, .cancelled, file: file, line: line)
    }
}

/// gzip, as a server's `Content-Encoding: gzip` body: `/bin/gzip` on a temporary file.
enum Gzip {
    static func compress(_ data: Data, level: Int = 6) throws -> Data {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-gzip-\(UUID().uuidString)")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return try output(of: "gzip -c -\(level) < \"$0\"", argument: file.path)
    }

    /// What `/bin/sh -c command` writes to its standard output (`argument` is its `$0`).
    static func output(of command: String, argument: String = "sh") throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command, argument]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let written = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return written
    }
}

extension XCTestCase {
    /// Waits (bounded: about 5 s) until `condition` holds, then asserts it. A hang guard for
    /// work that finishes on another queue, not a timing assertion.
    func eventually(
        _ condition: () -> Bool, _ message: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(condition(), message, file: file, line: line)
    }

    /// Runs a data task of `manager` (its body collected) for `url` to its end, waiting for
    /// its `taskDidComplete`, and returns it.
    func finishedDataTask(_ manager: URLSessionManager, _ url: URL) async -> DataTask {
        let task = manager.dataTask(with: URLRequest(url: url)) { _ in }
        let done = expectation(forNotification: .taskDidComplete, object: task)
        task.resume()
        await fulfillment(of: [done], timeout: 30)
        return task
    }
}

extension TestServer {
    /// Routes `path` to `first` for its first request and to `later` for every one after
    /// (a failure a retry gets past).
    func routeAnsweringFirst(_ path: String, with first: TestResponse, thenWith later: TestResponse) {
        let requests = Mutex(0)
        route(path) { _ in
            let count = requests.withLock { value -> Int in
                value += 1
                return value
            }
            return count == 1 ? first : later
        }
    }
}
