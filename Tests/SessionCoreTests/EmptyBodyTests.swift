import Foundation
import Serialization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Requests with an empty body against httpbin: what the serializers build (AFNetworking's
/// rules for nil parameters) and what actually goes on the wire.
final class EmptyBodyTests: XCTestCase {
    var manager: HTTPSessionManager!

    override func setUp() async throws {
        manager = HTTPSessionManager(baseURL: try Peer.httpbin)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    /// AFHTTPRequestSerializer gives POST, PUT and PATCH with nil parameters an empty form body:
    /// the request carries `Data()` and the form Content-Type, and the server sees
    /// `Content-Length: 0`, so servers that demand a length accept it.
    func testNilParametersSendAnEmptyFormBodyWithContentLengthZero() async throws {
        typealias Verb = (
            HTTPSessionManager, @escaping @Sendable (DataTask, (any Sendable)?) -> Void,
            @escaping @Sendable (DataTask?, any Error) -> Void
        ) -> DataTask?
        let verbs: [(name: String, call: Verb)] = [
            ("POST", { $0.post("post", parameters: nil, success: $1, failure: $2) }),
            ("PUT", { $0.put("put", parameters: nil, success: $1, failure: $2) }),
            ("PATCH", { $0.patch("patch", parameters: nil, success: $1, failure: $2) }),
        ]
        for (name, call) in verbs {
            let manager = try XCTUnwrap(self.manager)
            let (returned, outcome) = await verbOutcome { success, failure in call(manager, success, failure) }
            let task = try XCTUnwrap(returned, name)
            XCTAssertEqual(task.originalRequest?.httpMethod, name)
            XCTAssertEqual(task.originalRequest?.httpBody, Data(), name)
            let body = try XCTUnwrap(outcome.json, "\(name): \(outcome)")
            XCTAssertEqual(body["headers"]?["Content-Length"]?.stringValue, "0", name)
            XCTAssertEqual(body["headers"]?["Content-Type"]?.stringValue, "application/x-www-form-urlencoded", name)
            XCTAssertNil(body["headers"]?["Transfer-Encoding"], name)
            XCTAssertEqual(body["data"]?.stringValue, "", name)
            XCTAssertEqual(body["form"], [:], name)
        }
    }

    /// AFJSONRequestSerializer with nil parameters sets neither a body nor a Content-Type; the
    /// engine still says `Content-Length: 0` for a POST without a body.
    func testJSONSerializerWithNilParametersSendsNoBody() async throws {
        manager.requestSerializer = JSONRequestSerializer()
        let (returned, outcome) = await verbOutcome { success, failure in
            manager.post("post", parameters: nil, success: success, failure: failure)
        }
        let task = try XCTUnwrap(returned)
        XCTAssertNil(task.originalRequest?.httpBody)
        XCTAssertNil(task.originalRequest?.value(forHTTPHeaderField: "Content-Type"))
        let body = try XCTUnwrap(outcome.json, "\(outcome)")
        XCTAssertEqual(body["headers"]?["Content-Length"]?.stringValue, "0")
        XCTAssertEqual(body["data"]?.stringValue, "")
    }

    /// A request built by hand with `httpBody = Data()` goes out as a zero-length body for
    /// every method that carries one.
    func testEmptyHTTPBodyGoesOutAsContentLengthZero() async throws {
        let raw = URLSessionManager.raw()
        defer { raw.invalidateSessionCancelingTasks(true, resetSession: false) }
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            var request = URLRequest(url: try Peer.url("/anything"))
            request.httpMethod = method
            request.httpBody = Data()
            let response = await raw.response(for: request)
            XCTAssertNil(response.error, method)
            let echo = try json(response.data)
            XCTAssertEqual(echo["method"] as? String, method)
            let headers = try XCTUnwrap(echo["headers"] as? [String: String], method)
            XCTAssertEqual(headers["Content-Length"], "0", method)
            XCTAssertNil(headers["Transfer-Encoding"], method)
            XCTAssertEqual(echo["data"] as? String, "", method)
        }
    }
}
