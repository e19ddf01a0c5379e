import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// What a verb method's callbacks reported.
enum VerbOutcome: Sendable {
    case success(DataTask, (any Sendable)?)
    case failure(DataTask?, any Error)

    var value: (any Sendable)? {
        if case .success(_, let value) = self { return value }
        return nil
    }

    var error: (any Error)? {
        if case .failure(_, let error) = self { return error }
        return nil
    }

    var json: JSONValue? { value as? JSONValue }
}

/// Calls a verb method with callbacks that resume the test, and returns the returned task
/// and what the callbacks reported.
func verbOutcome(
    _ call: (
        _ success: @escaping @Sendable (DataTask, (any Sendable)?) -> Void,
        _ failure: @escaping @Sendable (DataTask?, any Error) -> Void
    ) -> DataTask?
) async -> (returned: DataTask?, outcome: VerbOutcome) {
    let returned = Mutex<DataTask?>(nil)
    let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<VerbOutcome, Never>) in
        let task = call(
            { task, value in continuation.resume(returning: .success(task, value)) },
            { task, error in continuation.resume(returning: .failure(task, error)) })
        returned.withLock { $0 = task }
    }
    return (returned.withLock { $0 }, outcome)
}

final class HTTPSessionManagerTests: XCTestCase {
    var manager: HTTPSessionManager!

    override func setUp() async throws {
        manager = HTTPSessionManager(baseURL: try Peer.httpbin)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    // MARK: - Verbs against httpbin

    func testGETPutsMixedParametersInTheQueryAndSucceedsWithJSON() async throws {
        let (returned, outcome) = await verbOutcome { success, failure in
            manager.get("get", parameters: ["q": "curlew bird", "page": 2, "tags": ["a", "b"]], headers: nil,
                        success: success, failure: failure)
        }
        let task = try XCTUnwrap(returned)
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual(task.originalRequest?.httpMethod, "GET")
        let body = try XCTUnwrap(outcome.json, "\(outcome)")
        XCTAssertEqual(body["args"]?["q"]?.stringValue, "curlew bird")
        XCTAssertEqual(body["args"]?["page"]?.stringValue, "2")
        XCTAssertEqual(body["args"]?["tags[]"]?.arrayValue?.compactMap(\.stringValue), ["a", "b"])
        guard case .success(let successTask, _) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertTrue(successTask === task, "success receives the returned task")
    }

    func testPOSTSendsAFormBody() async throws {
        let (_, outcome) = await verbOutcome { success, failure in
            manager.post("post", parameters: ["name": "curlew", "count": 3], success: success, failure: failure)
        }
        let body = try XCTUnwrap(outcome.json, "\(outcome)")
        XCTAssertEqual(body["form"]?["name"]?.stringValue, "curlew")
        XCTAssertEqual(body["form"]?["count"]?.stringValue, "3")
        XCTAssertEqual(body["headers"]?["Content-Type"]?.stringValue, "application/x-www-form-urlencoded")
    }

    func testPOSTWithTheJSONRequestSerializerSendsAJSONBody() async throws {
        manager.requestSerializer = JSONRequestSerializer()
        let (_, outcome) = await verbOutcome { success, failure in
            manager.post("post", parameters: ["name": "curlew", "legs": 2, "wings": ["left", "right"]],
                         success: success, failure: failure)
        }
        let body = try XCTUnwrap(outcome.json, "\(outcome)")
        XCTAssertEqual(body["json"]?["name"]?.stringValue, "curlew")
        XCTAssertEqual(body["json"]?["legs"]?.intValue, 2)
        XCTAssertEqual(body["json"]?["wings"]?[1]?.stringValue, "right")
        XCTAssertEqual(body["headers"]?["Content-Type"]?.stringValue, "application/json")
    }

    func testPUTPATCHAndDELETEUseTheirMethodsAndEncodings() async throws {
        let (_, put) = await verbOutcome { success, failure in
            manager.put("put", parameters: ["k": "form"], success: success, failure: failure)
        }
        XCTAssertEqual(put.json?["form"]?["k"]?.stringValue, "form", "\(put)")

        manager.requestSerializer = JSONRequestSerializer()
        let (_, patch) = await verbOutcome { success, failure in
            manager.patch("patch", parameters: ["k": "json", "n": 1], success: success, failure: failure)
        }
        XCTAssertEqual(patch.json?["json"]?["k"]?.stringValue, "json", "\(patch)")

        // DELETE encodes its parameters in the URI, even with the JSON serializer.
        let (returned, delete) = await verbOutcome { success, failure in
            manager.delete("delete", parameters: ["id": 42], success: success, failure: failure)
        }
        XCTAssertEqual(delete.json?["args"]?["id"]?.stringValue, "42", "\(delete)")
        XCTAssertEqual(returned?.originalRequest?.httpMethod, "DELETE")
        XCTAssertNil(returned?.originalRequest?.httpBody)
    }

    func testHEADSucceedsWithTheTaskOnly() async throws {
        let response: HTTPURLResponse? = await withCheckedContinuation { continuation in
            manager.head("get", success: { task in
                continuation.resume(returning: task.response)
            }, failure: { _, error in
                XCTFail("\(error)")
                continuation.resume(returning: nil)
            })
        }
        XCTAssertEqual(response?.statusCode, 200)
    }

    func testPerRequestHeadersWinOverTheSerializersHeaders() async throws {
        manager.requestSerializer.setValue("from-serializer", forHTTPHeaderField: "X-Curlew")
        manager.requestSerializer.setValue("kept", forHTTPHeaderField: "X-Kept")
        let (_, outcome) = await verbOutcome { success, failure in
            manager.get("headers", parameters: nil, headers: ["X-Curlew": "from-call"], success: success, failure: failure)
        }
        let headers = try XCTUnwrap(outcome.json?["headers"], "\(outcome)")
        XCTAssertEqual(headers["X-Curlew"]?.stringValue, "from-call")
        XCTAssertEqual(headers["X-Kept"]?.stringValue, "kept")
        XCTAssertTrue(headers["User-Agent"]?.stringValue?.hasPrefix("Curlew/") ?? false)
    }

    func testAuthorizationSetInPlaceOnTheRequestSerializer() async throws {
        manager.requestSerializer.setAuthorizationHeaderField(username: "user", password: "secret")
        let (_, outcome) = await verbOutcome { success, failure in
            manager.get("basic-auth/user/secret", success: success, failure: failure)
        }
        XCTAssertEqual(outcome.json?["authenticated"]?.boolValue, true, "\(outcome)")
    }

    func testDownloadProgressIsReportedAndTheResponseSerializerCanBeSwapped() async throws {
        manager.responseSerializer = HTTPResponseSerializer()
        // 102,400 bytes: the most httpbin's /bytes serves.
        let lastProgress = Mutex<Int64>(0)
        let (_, outcome) = await verbOutcome { success, failure in
            manager.get("bytes/102400", progress: { progress in
                lastProgress.withLock { $0 = max($0, progress.completedUnitCount) }
            }, success: success, failure: failure)
        }
        XCTAssertEqual((outcome.value as? Data)?.count, 102_400, "\(outcome)")
        // Progress closures run on the operation queue; the last one may trail completion.
        try await waitUntil { lastProgress.withLock { $0 } == 102_400 }
    }

    func testCallbacksRunOnTheCompletionQueue() async throws {
        let queue = DispatchQueue(label: "test.http.completion")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 3)
        manager.completionQueue = queue
        let onQueue: [Bool] = await withCheckedContinuation { continuation in
            let results = Mutex<[Bool]>([])
            @Sendable func record() {
                let count = results.withLock { results -> Int in
                    results.append(DispatchQueue.getSpecific(key: key) == 3)
                    return results.count
                }
                if count == 2 { continuation.resume(returning: results.withLock { $0 }) }
            }
            manager.get("json", success: { _, _ in record() }, failure: { _, _ in record() })
            manager.get("a b", failure: { _, _ in record() })  // fails before any transfer
        }
        XCTAssertEqual(onQueue, [true, true])
    }

    // MARK: - Error paths

    func testResponseSerializerFailureCallsFailureWithResponseAndBody() async throws {
        let (returned, outcome) = await verbOutcome { success, failure in
            manager.get("html", success: success, failure: failure)
        }
        guard case .failure(let task, let error) = outcome else { return XCTFail("expected failure, got \(outcome)") }
        XCTAssertTrue(task === returned)
        let serializationError = try XCTUnwrap(error as? SerializationError)
        guard case .unacceptableContentType(let type, _, _, _) = serializationError else {
            return XCTFail("\(serializationError)")
        }
        XCTAssertEqual(type, "text/html")
        XCTAssertEqual(serializationError.response?.statusCode, 200)
        let html = String(decoding: try XCTUnwrap(serializationError.data), as: UTF8.self)
        XCTAssertTrue(html.contains("Herman Melville"))
        XCTAssertNotNil(task?.error as? SerializationError, "the task records the serializer's error")
    }

    func testUnacceptableStatusCodeIsAFailure() async throws {
        let (_, outcome) = await verbOutcome { success, failure in
            manager.get("status/418", success: success, failure: failure)
        }
        guard case .unacceptableStatusCode(let code, let response, _)? = outcome.error as? SerializationError else {
            return XCTFail("\(outcome)")
        }
        XCTAssertEqual(code, 418)
        XCTAssertEqual(response.statusCode, 418)
    }

    func testUnserializableParametersReturnNilAndCallFailureWithoutATask() async throws {
        manager.requestSerializer = JSONRequestSerializer()
        let (returned, outcome) = await verbOutcome { success, failure in
            manager.post("post", parameters: ["bad": Double.nan], success: success, failure: failure)
        }
        XCTAssertNil(returned)
        guard case .failure(let task, let error) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertNil(task)
        guard case .invalidParameters? = error as? SerializationError else { return XCTFail("\(error)") }
        XCTAssertTrue(manager.tasks.isEmpty, "nothing was created")
    }

    func testHeaderInjectionAndBadURLStringsAreRefusedBeforeATaskExists() async throws {
        let (injected, injection) = await verbOutcome { success, failure in
            manager.get("get", headers: ["X-Evil": "a\r\nHost: evil"], success: success, failure: failure)
        }
        XCTAssertNil(injected)
        guard case .invalidHeader(let field, _)? = injection.error as? SerializationError else {
            return XCTFail("\(injection)")
        }
        XCTAssertEqual(field, "X-Evil")

        for bad in ["a b", "tab\there", "line\nbreak"] {
            let (returned, outcome) = await verbOutcome { success, failure in
                manager.get(bad, success: success, failure: failure)
            }
            XCTAssertNil(returned, bad)
            guard case .invalidURL? = outcome.error as? SerializationError else { return XCTFail("\(bad): \(outcome)") }
        }

        let noBase = HTTPSessionManager(baseURL: nil)
        let (relative, relativeOutcome) = await verbOutcome { success, failure in
            noBase.get("users", success: success, failure: failure)
        }
        XCTAssertNil(relative)
        guard case .invalidURL? = relativeOutcome.error as? SerializationError else { return XCTFail("\(relativeOutcome)") }
        noBase.invalidateSessionCancelingTasks(true, resetSession: false)
    }

    /// Per-call headers follow the one RFC 9110 rule the serializers and the engine share:
    /// a tab is a legal value character; other control characters are refused before a task
    /// exists, with the serializer's error.
    func testPerCallHeadersRefuseControlCharactersButSendTabs() async throws {
        for bad in ["a\u{1}b", "a\u{1B}b", "a\u{7F}b"] {
            let (returned, outcome) = await verbOutcome { success, failure in
                manager.get("get", headers: ["X-Control": bad], success: success, failure: failure)
            }
            XCTAssertNil(returned, bad.debugDescription)
            guard case .invalidHeader(let field, _)? = outcome.error as? SerializationError else {
                return XCTFail("\(bad.debugDescription): \(outcome)")
            }
            XCTAssertEqual(field, "X-Control")
        }
        XCTAssertTrue(manager.tasks.isEmpty, "nothing was created")

        let (_, outcome) = await verbOutcome { success, failure in
            manager.get("headers", headers: ["X-Tab": "a\tb"], success: success, failure: failure)
        }
        let headers = try XCTUnwrap(outcome.json?["headers"], "\(outcome)")
        XCTAssertEqual(headers["X-Tab"]?.stringValue, "a\tb")
    }

    func testMultipartBlockErrorReturnsNilAndComesOutUnchanged() async throws {
        let (returned, outcome) = await verbOutcome { success, failure in
            manager.post("post", parameters: ["a": 1], constructingBodyWith: { _ in
                throw CocoaError(.featureUnsupported)
            }, success: success, failure: failure)
        }
        XCTAssertNil(returned)
        XCTAssertEqual((outcome.error as? CocoaError)?.code, .featureUnsupported, "the block's error comes out unchanged")
    }

    // MARK: - Base URL

    func testBaseURLGainsATrailingSlashSoRelativeStringsExtendItsPath() throws {
        let cases: [(base: String?, path: String, expected: String?)] = [
            ("http://h/v1", "users", "http://h/v1/users"),
            ("http://h/v1/", "users", "http://h/v1/users"),
            ("http://h/v1", "users?a=1", "http://h/v1/users?a=1"),
            ("http://h/v1", "/users", "http://h/users"),
            ("http://h/v1", "../x", "http://h/x"),
            ("http://h/v1", "https://other.example/x", "https://other.example/x"),
            ("http://h/v1", "", "http://h/v1/"),
            ("http://h", "users", "http://h/users"),
            (nil, "http://h/users", "http://h/users"),
            (nil, "users", nil),
            ("http://h/v1", "a b", nil),
        ]
        for (base, path, expected) in cases {
            let manager = HTTPSessionManager(baseURL: base.flatMap { URL(string: $0) })
            defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
            let resolved = try? manager.absoluteURLString(for: path)
            XCTAssertEqual(resolved, expected, "\(base ?? "nil") + \(path)")
        }
        let manager = HTTPSessionManager(baseURL: URL(string: "http://h/v1"))
        XCTAssertEqual(manager.baseURL?.absoluteString, "http://h/v1/")
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
    }

    func testRelativePathRoundTripsThroughABaseURLWithAPath() async throws {
        let base = try XCTUnwrap(URL(string: "anything/v1", relativeTo: try Peer.httpbin)?.absoluteURL)
        let versioned = HTTPSessionManager(baseURL: base)
        defer { versioned.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (_, outcome) = await verbOutcome { success, failure in
            versioned.get("users", parameters: ["id": 7], success: success, failure: failure)
        }
        let url = try XCTUnwrap(outcome.json?["url"]?.stringValue, "\(outcome)")
        XCTAssertTrue(url.hasSuffix("/anything/v1/users?id=7"), url)
    }

    func testManagersDefaultToHTTPRequestAndJSONResponseSerializers() {
        XCTAssertTrue(manager.requestSerializer is HTTPRequestSerializer)
        XCTAssertTrue(manager.responseSerializer is JSONResponseSerializer)
        let plain = HTTPSessionManager()
        XCTAssertNil(plain.baseURL)
        plain.invalidateSessionCancelingTasks(true, resetSession: false)
    }

    // MARK: - Async overloads

    struct Echo: Decodable, Sendable {
        let args: [String: String]
        let url: String
    }

    func testAsyncGETDecodesADecodable() async throws {
        let echo = try await manager.get("get", parameters: ["q": "curlew", "n": 1], as: Echo.self)
        XCTAssertEqual(echo.args, ["q": "curlew", "n": "1"])
        XCTAssertTrue(echo.url.hasSuffix("/get?n=1&q=curlew"), echo.url)
    }

    func testAsyncPOSTPUTPATCHDELETEDecode() async throws {
        struct Form: Decodable { let form: [String: String] }
        struct JSONEcho: Decodable { let json: [String: Int] }
        let posted = try await manager.post("post", parameters: ["a": "1"], as: Form.self)
        XCTAssertEqual(posted.form, ["a": "1"])
        let put = try await manager.put("put", parameters: ["b": "2"], as: Form.self)
        XCTAssertEqual(put.form, ["b": "2"])
        manager.requestSerializer = JSONRequestSerializer()
        let patched = try await manager.patch("patch", parameters: ["c": 3], as: JSONEcho.self)
        XCTAssertEqual(patched.json, ["c": 3])
        let deleted = try await manager.delete("delete", parameters: ["d": 4], as: Echo.self)
        XCTAssertEqual(deleted.args, ["d": "4"])
    }

    func testAsyncDecodableFailureCarriesTheResponseAndBody() async throws {
        do {
            _ = try await manager.get("html", as: Echo.self)
            XCTFail("HTML is not JSON")
        } catch let error as SerializationError {
            XCTAssertEqual(error.response?.statusCode, 200)
            XCTAssertTrue(String(decoding: error.data ?? Data(), as: UTF8.self).contains("Moby-Dick"))
        }
    }

    func testAsyncSerializerOverloadReturnsTheSerializersOutput() async throws {
        let text = try await manager.get("encoding/utf8", serializer: StringResponseSerializer())
        XCTAssertTrue(text.contains("∮ E⋅da = Q"), String(text.prefix(200)))
        let json = try await manager.get("json", serializer: JSONResponseSerializer())
        XCTAssertEqual(json?["slideshow"]?["author"]?.stringValue, "Yours Truly")
    }

    func testAsyncHeadResponseValidatesWithTheManagersSerializer() async throws {
        let response = try await manager.headResponse("get")
        XCTAssertEqual(response.statusCode, 200)
        do {
            _ = try await manager.headResponse("status/404")
            XCTFail("404 is not acceptable")
        } catch let error as SerializationError {
            XCTAssertEqual(error.response?.statusCode, 404)
        }
    }

    func testAsyncUnbuildableRequestThrowsTheSerializationError() async throws {
        do {
            _ = try await manager.get("a b", as: Echo.self)
            XCTFail("expected invalidURL")
        } catch SerializationError.invalidURL(let string) {
            XCTAssertEqual(string, "a b")
        }
    }

    func testCancellingTheSwiftTaskCancelsTheTransfer() async throws {
        // An ordering, not a stopwatch: a twin call, started first and never cancelled, must
        // still be waiting for the server when the cancelled call has ended.
        let twinEnded = Mutex(false)
        let twin = Task { [manager] in
            defer { twinEnded.withLock { $0 = true } }
            _ = try await manager!.get("delay/10", as: Echo.self)
        }
        let call = Task { [manager] in try await manager!.get("delay/10", as: Echo.self) }
        try await Task.sleep(nanoseconds: 200_000_000)
        await assertCancelling(call)
        XCTAssertFalse(twinEnded.withLock { $0 }, "the cancelled call ended only after the server answered")
        twin.cancel()
        _ = try? await twin.value
    }
}

/// Polls `condition` every 10 ms for up to `timeout` seconds (generous: CI is a loaded
/// 2-core machine; a working run returns as soon as the condition holds).
func waitUntil(timeout: TimeInterval = 30, _ condition: @Sendable () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        guard Date() < deadline else { return XCTFail("condition not met within \(timeout) s") }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
}
