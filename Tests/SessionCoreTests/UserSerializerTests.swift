import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore

/// A user's serializer implements one method, `responseObject(for:data:)`, and works with the
/// manager, `object(for:serializer:)`, `HTTPSessionManager` and `CompoundResponseSerializer`
/// (issue 20: the engine's own needs are not part of the public protocol). Against httpbin.
final class UserSerializerTests: XCTestCase {
    /// What the one-method serializer makes of a response.
    struct Summary: Sendable, Equatable {
        let status: Int
        let contentType: String?
        let bytes: Int
    }

    /// The documented shape: one method, validation borrowed from `HTTPResponseSerializer`.
    struct SummarySerializer: ResponseSerialization {
        var base = HTTPResponseSerializer()

        func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> Summary {
            let body = try base.responseObject(for: response, data: data) ?? Data()
            return Summary(
                status: response?.statusCode ?? 0, contentType: response?.value(forHTTPHeaderField: "content-type"),
                bytes: body.count)
        }
    }

    /// Opts into the request: an empty body is fine for `HEAD` only.
    struct MethodSerializer: ResponseSerialization {
        struct EmptyBody: Error {}

        func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> String {
            try responseObject(for: nil, response: response, data: data)
        }

        func responseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws -> String {
            let method = request?.httpMethod ?? "?"
            if data?.isEmpty ?? true, method != "HEAD" { throw EmptyBody() }
            return "\(method) \(response?.statusCode ?? 0)"
        }
    }

    /// A non-`Sendable` output, mutable by whoever receives it.
    final class Page {
        var heading: String

        init(heading: String) {
            self.heading = heading
        }
    }

    /// Finds the first `<h1>` of an HTML page.
    struct PageSerializer: ResponseSerialization {
        struct NoHeading: Error {}

        func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> Page {
            let text = String(decoding: data ?? Data(), as: UTF8.self)
            guard let open = text.range(of: "<h1>"), let close = text.range(of: "</h1>", range: open.upperBound..<text.endIndex)
            else { throw NoHeading() }
            return Page(heading: String(text[open.upperBound..<close.lowerBound]))
        }
    }

    var manager: URLSessionManager!

    override func setUp() {
        manager = URLSessionManager()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    private func request(_ path: String, method: String = "GET") throws -> URLRequest {
        var request = URLRequest(url: try Peer.url(path))
        request.httpMethod = method
        return request
    }

    private func response(_ path: String, method: String = "GET") async throws -> DataResponse {
        let request = try request(path, method: method)
        return await withCheckedContinuation { continuation in
            manager.dataTask(with: request) { continuation.resume(returning: $0) }.resume()
        }
    }

    func testAOneMethodSerializerIsTheManagersSerializer() async throws {
        manager.responseSerializer = SummarySerializer()
        let json = try await response("/json")
        let summary = try XCTUnwrap(json.value as? Summary, "\(json.result)")
        XCTAssertEqual(summary, Summary(status: 200, contentType: "application/json", bytes: json.data?.count ?? -1))
        XCTAssertGreaterThan(summary.bytes, 0)

        let teapot = try await response("/status/418")
        guard case .unacceptableStatusCode(418, let failing, _)? = teapot.error as? SerializationError else {
            return XCTFail("\(teapot.result)")
        }
        XCTAssertEqual(failing.statusCode, 418, "the serializer saw the response built from the head")
    }

    func testAOneMethodSerializerThroughObjectAndTheHTTPManager() async throws {
        let summary = try await manager.object(for: request("/html"), serializer: SummarySerializer())
        XCTAssertEqual(summary.status, 200)
        XCTAssertEqual(summary.contentType, "text/html; charset=utf-8")

        let http = HTTPSessionManager(baseURL: try Peer.httpbin)
        defer { http.invalidateSessionCancelingTasks(true, resetSession: false) }
        let viaGet = try await http.get("json", serializer: SummarySerializer())
        XCTAssertEqual(viaGet.contentType, "application/json")
        do {
            _ = try await http.get("status/404", serializer: SummarySerializer())
            XCTFail("a 404 passed the borrowed validation")
        } catch let error as SerializationError {
            guard case .unacceptableStatusCode(404, _, _) = error else { return XCTFail("\(error)") }
        }
    }

    func testAOneMethodSerializerInsideACompound() async throws {
        manager.responseSerializer = CompoundResponseSerializer(responseSerializers: [
            JSONResponseSerializer(), SummarySerializer(),
        ])
        let html = try await response("/html")
        let summary = try XCTUnwrap(html.value as? Summary, "JSON refuses text/html, the user's serializer takes it: \(html.result)")
        XCTAssertEqual(summary.contentType, "text/html; charset=utf-8")
        let json = try await response("/json")
        XCTAssertNotNil(json.value as? JSONValue, "the first serializer still wins: \(json.result)")
    }

    func testARequestAwareSerializerGetsTheRequest() async throws {
        manager.responseSerializer = MethodSerializer()
        let head = try await response("/get", method: "HEAD")
        XCTAssertEqual(head.value as? String, "HEAD 200", "\(head.result)")
        let get = try await response("/get")
        XCTAssertEqual(get.value as? String, "GET 200", "\(get.result)")
        let viaObject = try await manager.object(for: request("/get", method: "HEAD"), serializer: MethodSerializer())
        XCTAssertEqual(viaObject, "HEAD 200")
    }

    func testANonSendableOutputReachesTheCallerOfObject() async throws {
        let page = try await manager.object(for: request("/html"), serializer: PageSerializer())
        XCTAssertTrue(page.heading.contains("Herman Melville"), page.heading)
        page.heading = "owned by the caller"            // a `sending` result: ours to mutate
        XCTAssertEqual(page.heading, "owned by the caller")
    }
}
