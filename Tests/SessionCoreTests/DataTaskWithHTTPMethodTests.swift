import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `HTTPSessionManager.dataTask(withHTTPMethod:…)`, AFNetworking's
/// `dataTaskWithHTTPMethod:URLString:parameters:headers:uploadProgress:downloadProgress:success:failure:`:
/// any method, a task returned not resumed, and the one place every verb's task is made.
final class DataTaskWithHTTPMethodTests: XCTestCase {
    /// Adds a header to every task it makes, as a subclass overriding AFNetworking's method would.
    private final class StampingManager: HTTPSessionManager, @unchecked Sendable {
        // @unchecked Sendable: adds no state to HTTPSessionManager.
        override func dataTask(
            withHTTPMethod method: String, urlString: String, parameters: (any Sendable)? = nil,
            headers: [String: String]? = nil, uploadProgress: (@Sendable (Progress) -> Void)? = nil,
            downloadProgress: (@Sendable (Progress) -> Void)? = nil,
            success: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil,
            failure: (@Sendable (DataTask?, any Error) -> Void)? = nil
        ) -> DataTask? {
            var stamped = headers ?? [:]
            stamped["X-Stamp"] = "curlew"
            return super.dataTask(
                withHTTPMethod: method, urlString: urlString, parameters: parameters, headers: stamped,
                uploadProgress: uploadProgress, downloadProgress: downloadProgress, success: success, failure: failure)
        }
    }

    func testAnyMethodTaskIsReturnedSuspendedAndSendsOnResume() async throws {
        let server = try TestServer { request in .json("{\"method\":\"\(request.method)\"}") }
        defer { server.shutdown() }
        let manager = HTTPSessionManager(baseURL: try server.url("/"))
        let (returned, outcome) = await verbOutcome { success, failure in
            let task = manager.dataTask(
                withHTTPMethod: "PROPFIND", urlString: "dav/folder", parameters: ["depth": 1],
                headers: ["Depth": "1"], success: success, failure: failure)
            // Not resumed: the caller decides when it starts.
            XCTAssertEqual(task?.state, .suspended)
            XCTAssertEqual(server.requests.count, 0)
            task?.resume()
            return task
        }
        guard case .success(let task, let value) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertTrue(task === returned)
        XCTAssertEqual((value as? JSONValue)?["method"]?.stringValue, "PROPFIND")
        let received = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(received.method, "PROPFIND")
        XCTAssertEqual(received.uri, "/dav/folder")  // not a URI method: the parameter is in the body
        XCTAssertEqual(String(decoding: received.body, as: UTF8.self), "depth=1")
        XCTAssertEqual(received.headers.first { $0.name.lowercased() == "depth" }?.value, "1")
    }

    func testUnbuildableRequestReturnsNilAndFailsWithoutATask() async throws {
        let manager = HTTPSessionManager(baseURL: nil)
        let (returned, outcome) = await verbOutcome { success, failure in
            manager.dataTask(
                withHTTPMethod: "GET", urlString: "no scheme here", parameters: nil, success: success, failure: failure)
        }
        XCTAssertNil(returned)
        guard case .failure(let task, let error) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertNil(task)
        XCTAssertTrue(error is SerializationError, "\(error)")
    }

    func testVerbsMakeTheirTasksThroughTheOverridableMethod() async throws {
        let manager = StampingManager(baseURL: try Peer.httpbin)
        let (_, got) = await verbOutcome { success, failure in
            manager.get("headers", success: success, failure: failure)
        }
        XCTAssertEqual(got.json?["headers"]?["X-Stamp"]?.stringValue, "curlew", "\(got)")
        let (_, deleted) = await verbOutcome { success, failure in
            manager.delete("delete", parameters: ["id": 7], success: success, failure: failure)
        }
        XCTAssertEqual(deleted.json?["headers"]?["X-Stamp"]?.stringValue, "curlew", "\(deleted)")
        XCTAssertEqual(deleted.json?["args"]?["id"]?.stringValue, "7")
    }

    func testMixedDictionaryLiteralAndProgress() async throws {
        let manager = HTTPSessionManager(baseURL: try Peer.httpbin)
        let reported = Mutex(Int64(0))
        let (_, outcome) = await verbOutcome { success, failure in
            let task = manager.dataTask(
                withHTTPMethod: "GET", urlString: "get", parameters: ["q": "curlew", "page": 2],
                downloadProgress: { progress in reported.withLock { $0 = max($0, progress.completedUnitCount) } },
                success: success, failure: failure)
            task?.resume()
            return task
        }
        XCTAssertEqual(outcome.json?["args"]?["q"]?.stringValue, "curlew", "\(outcome)")
        XCTAssertEqual(outcome.json?["args"]?["page"]?.stringValue, "2")
        XCTAssertGreaterThan(reported.withLock { $0 }, 0)
    }
}
