import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import Serialization

/// The head-based serializer path gives the same results and errors as the response-based
/// one, and builds Foundation's `HTTPURLResponse` only when an error must carry it.
final class ResponseHeadSerializationTests: XCTestCase {
    private func head(status: Int = 200, contentType: String? = nil) throws -> HTTPResponseHead {
        let url = try XCTUnwrap(URL(string: "https://example.com/resource"))
        return HTTPResponseHead(
            url: url, statusCode: status, fields: contentType.map { [("Content-Type", $0)] } ?? [])
    }

    func testRawBytesAreValidatedWithoutBuildingTheResponse() throws {
        let head = try head(contentType: "text/plain")
        let data = Data("x".utf8)
        XCTAssertEqual(try HTTPResponseSerializer().responseObject(for: nil, head: head, data: data), data)
        XCTAssertFalse(head.isResponseBuilt)
        let boxed = try HTTPResponseSerializer().sendableResponseObject(for: nil, head: head, data: data)
        XCTAssertEqual(boxed as? Data, data)
        XCTAssertFalse(head.isResponseBuilt)
    }

    /// The engine reaches Curlew's serializers through `any ResponseSerialization`: the
    /// dispatch to the package refinement keeps the head-based path (nothing is built).
    func testTheEngineEntryPointsKeepCurlewsSerializersHeadBased() throws {
        let serializers: [any ResponseSerialization] = [HTTPResponseSerializer(), JSONResponseSerializer()]
        for serializer in serializers {
            let head = try head(contentType: "application/json")
            let boxed = try serializer.engineSendableResponseObject(for: nil, head: head, data: Data("[1]".utf8))
            XCTAssertNotNil(boxed, "\(type(of: serializer))")
            XCTAssertFalse(head.isResponseBuilt, "\(type(of: serializer)) built the response")
            XCTAssertFalse(serializer.enginePrefersConcurrentProcessing)
        }
        let json = try JSONResponseSerializer().engineResponseObject(
            for: nil, head: head(contentType: "application/json"), data: Data("[1]".utf8))
        XCTAssertEqual(json, [1])
        let decodableHead = try head(contentType: "application/json")
        let decoded = try DecodableResponseSerializer<[Int]>().engineResponseObject(
            for: nil, head: decodableHead, data: Data("[1]".utf8))
        XCTAssertEqual(decoded, [1])
        XCTAssertFalse(decodableHead.isResponseBuilt)
    }

    func testAnUnacceptableStatusCarriesTheBuiltResponse() throws {
        let head = try head(status: 404, contentType: "text/plain")
        assertSerializationError(try HTTPResponseSerializer().responseObject(for: nil, head: head, data: Data("x".utf8))) { error in
            guard case .unacceptableStatusCode(404, let response, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(response.statusCode, 404)
            XCTAssertEqual(response.value(forHTTPHeaderField: "content-type"), "text/plain")
        }
        XCTAssertTrue(head.isResponseBuilt)
    }

    func testJSONMatchesTheResponsePath() throws {
        let serializer = JSONResponseSerializer()
        let body = Data(#"{"a": [1, 2]}"#.utf8)
        let head = try head(contentType: "application/json; charset=utf-8")
        let fromHead = try serializer.responseObject(for: nil, head: head, data: body)
        let fromResponse = try serializer.responseObject(
            for: makeResponse(contentType: "application/json; charset=utf-8"), data: body)
        XCTAssertEqual(fromHead, fromResponse)
        XCTAssertFalse(head.isResponseBuilt)

        assertSerializationError(try serializer.responseObject(for: nil, head: self.head(contentType: "text/html"), data: body)) { error in
            guard case .unacceptableContentType("text/html", _, _, _) = error else { return XCTFail("\(error)") }
        }
        let broken = try self.head(contentType: "application/json")
        assertSerializationError(try serializer.responseObject(for: nil, head: broken, data: Data("{".utf8))) { error in
            guard case .invalidBody(.json, let response, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(response?.statusCode, 200, "the error carries the response")
        }
        XCTAssertNil(try serializer.responseObject(for: nil, head: self.head(status: 204), data: nil))
    }

    func testAHEADRequestMayHaveAnEmptyDecodableBody() throws {
        var request = URLRequest(url: try XCTUnwrap(URL(string: "https://example.com/")))
        request.httpMethod = "HEAD"
        let serializer = DecodableResponseSerializer<Empty>()
        XCTAssertNoThrow(try serializer.responseObject(for: request, head: head(contentType: "application/json"), data: nil))
        assertSerializationError(try serializer.responseObject(for: nil, head: head(contentType: "application/json"), data: nil)) { error in
            guard case .emptyResponseBody = error else { return XCTFail("\(error)") }
        }
    }

    /// A serializer written before heads existed still works: the default builds the response.
    func testACustomSerializerGetsTheBuiltResponse() throws {
        struct StatusText: ResponseSerialization {
            func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> String {
                "\(response?.statusCode ?? 0) \(response?.value(forHTTPHeaderField: "Content-Type") ?? "")"
            }
        }
        let head = try head(status: 201, contentType: "text/plain")
        XCTAssertEqual(try StatusText().engineResponseObject(for: nil, head: head, data: nil), "201 text/plain")
        XCTAssertEqual(try StatusText().engineSendableResponseObject(for: nil, head: head, data: nil) as? String, "201 text/plain")
        XCTAssertTrue(head.isResponseBuilt)
    }

    func testAHeadWrappingAResponseReturnsIt() throws {
        let response = makeResponse(status: 202, contentType: "text/plain")
        let head = try XCTUnwrap(HTTPResponseHead(response))
        XCTAssertTrue(head.httpURLResponse === response)
        XCTAssertEqual(head.statusCode, 202)
        XCTAssertEqual(head.value(forHTTPHeaderField: "CONTENT-TYPE"), "text/plain")
    }
}
