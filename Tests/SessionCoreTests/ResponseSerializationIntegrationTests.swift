import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(FoundationXML)
import FoundationXML
#endif
import CurlewTestSupport
@testable import SessionCore

/// The manager's `responseSerializer` and `object(for:serializer:)` against httpbin.
final class ResponseSerializationIntegrationTests: XCTestCase {
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

    // MARK: - The manager's serializer

    func testDefaultSerializerParsesJSONOnTheCompletionQueue() async throws {
        XCTAssertTrue(manager.responseSerializer is JSONResponseSerializer)
        let queue = DispatchQueue(label: "test.serialization.completion")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 9)
        manager.completionQueue = queue
        let json = try request("/json")
        let (response, onQueue): (DataResponse, Bool) = await withCheckedContinuation { continuation in
            manager.dataTask(with: json) { response in
                continuation.resume(returning: (response, DispatchQueue.getSpecific(key: key) == 9))
            }.resume()
        }
        XCTAssertTrue(onQueue)
        let value = try XCTUnwrap(response.value as? JSONValue, "\(response.result)")
        XCTAssertEqual(value["slideshow"]?["title"]?.stringValue, "Sample Slide Show")
        XCTAssertNotNil(response.data, "the raw body stays available")
    }

    func testHTMLIsRejectedByTheJSONSerializerWithTheBodyInTheError() async throws {
        let task = Mutex<DataTask?>(nil)
        let html = try request("/html")
        let response: DataResponse = await withCheckedContinuation { continuation in
            let created = manager.dataTask(with: html) { continuation.resume(returning: $0) }
            task.withLock { $0 = created }
            created.resume()
        }
        let error = try XCTUnwrap(response.error as? SerializationError, "\(response.result)")
        guard case .unacceptableContentType(let type, let acceptable, let failing, let data) = error else {
            return XCTFail("\(error)")
        }
        XCTAssertEqual(type, "text/html")
        XCTAssertTrue(acceptable.contains("application/json"))
        XCTAssertEqual(failing.statusCode, 200)
        XCTAssertTrue(String(decoding: data ?? Data(), as: UTF8.self).contains("Herman Melville"))
        XCTAssertTrue(error.description.contains("text/html"), error.description)
        XCTAssertEqual(response.data, data)
        let recorded = task.withLock { $0 }?.error as? SerializationError
        XCTAssertNotNil(recorded, "the serializer's error is the task's error")
    }

    func testEmptyBodyOfHEADIsAccepted() async throws {
        let head = await manager.response(for: try request("/get", method: "HEAD"))
        XCTAssertNil(head.error, "\(head.result)")
        XCTAssertNil(head.value as? JSONValue)
        XCTAssertEqual(head.response?.statusCode, 200)
    }

    /// httpbin labels its 204 `text/html`. AFNetworking's validation records a content-type
    /// error only when the body is not empty (`[data length] > 0`), so an empty 204 succeeds
    /// with a nil object whatever its label.
    func testEmpty204LabelledTextHTMLIsAcceptedAsInAFNetworking() async throws {
        let noContent = await manager.response(for: try request("/status/204"))
        XCTAssertEqual(noContent.response?.statusCode, 204)
        XCTAssertNil(noContent.error, "\(noContent.result)")
        XCTAssertNil(noContent.value as? JSONValue)
    }

    func testEmpty204WithoutContentTypeIsAccepted() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/empty", response: TestResponse(status: 204))
        let response = await manager.response(for: URLRequest(url: try server.url("/empty")))
        XCTAssertEqual(response.response?.statusCode, 204)
        XCTAssertNil(response.error, "\(response.result)")
    }

    func testUTF8TextThroughTheStringSerializer() async throws {
        manager.responseSerializer = StringResponseSerializer()
        let response = await manager.response(for: try request("/encoding/utf8"))
        let text = try XCTUnwrap(response.value as? String, "\(response.result)")
        XCTAssertTrue(text.contains("∮ E⋅da = Q"))
        XCTAssertTrue(text.contains("ሰማይ አይታረስ"))
    }

    func testUnacceptableStatusIsTheResultsFailure() async throws {
        let response = await manager.response(for: try request("/status/500"))
        guard case .unacceptableStatusCode(500, let failing, _)? = response.error as? SerializationError else {
            return XCTFail("\(response.result)")
        }
        XCTAssertEqual(failing.statusCode, 500)
    }

    func testDataForNeverRunsTheSerializer() async throws {
        let (data, response) = try await manager.data(for: try request("/html"))
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertTrue(String(decoding: data, as: UTF8.self).contains("Herman Melville"))
    }

    func testStreamedTasksSkipTheSerializer() async throws {
        let received = Mutex(0)
        let bytes = try request("/bytes/5000")
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.dataTask(
                with: bytes,
                dataHandler: { chunk in received.withLock { $0 += chunk.count } },
                completionHandler: { continuation.resume(returning: $0) }
            ).resume()
        }
        XCTAssertNil(response.error, "octet-stream went to the data handler, not the JSON serializer")
        XCTAssertEqual(received.withLock { $0 }, 5000)
    }

    func testNonSendableOutputAsTheManagersSerializerFailsLoudly() async throws {
        manager.responseSerializer = XMLParserResponseSerializer()
        let response = await manager.response(for: try request("/xml"))
        guard case .outputNotSendable(let type)? = response.error as? SerializationError else {
            return XCTFail("\(response.result)")
        }
        XCTAssertEqual(type, "XMLParser")
    }

    func testTaskDidCompleteNotificationCarriesTheSerializedObject() async throws {
        let object = Mutex<JSONValue?>(nil)
        let observer = NotificationCenter.default.addObserver(forName: .taskDidComplete, object: nil, queue: nil) { note in
            let value = note.userInfo?[SessionNotificationKey.serializedResponse] as? JSONValue
            object.withLock { $0 = value }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        _ = await manager.response(for: try request("/json"))
        try await waitUntil { object.withLock { $0 } != nil }
        XCTAssertEqual(object.withLock { $0 }?["slideshow"]?["author"]?.stringValue, "Yours Truly")
    }

    // MARK: - object(for:serializer:)

    func testObjectForRequestReturnsAnXMLParser() async throws {
        let parser = try await manager.object(for: try request("/xml"), serializer: XMLParserResponseSerializer())
        let counter = ElementCounter()
        parser.delegate = counter
        XCTAssertTrue(parser.parse())
        XCTAssertEqual(counter.names.first, "slideshow")
        XCTAssertEqual(counter.names.filter { $0 == "slide" }.count, 2)
    }

    func testObjectForRequestReturnsAnXMLDocument() async throws {
        let document = try await manager.object(for: try request("/xml"), serializer: XMLDocumentResponseSerializer())
        XCTAssertEqual(document.rootElement()?.name, "slideshow")
        XCTAssertEqual(document.rootElement()?.elements(forName: "slide").count, 2)
    }

    func testObjectForRequestDecodesAndIgnoresTheManagersSerializer() async throws {
        struct Slideshow: Decodable { struct Show: Decodable { let title: String }; let slideshow: Show }
        manager.responseSerializer = StringResponseSerializer()
        let show = try await manager.object(for: try request("/json"), serializer: DecodableResponseSerializer<Slideshow>())
        XCTAssertEqual(show.slideshow.title, "Sample Slide Show")
    }

    func testObjectForRequestThrowsTheSerializersError() async throws {
        do {
            _ = try await manager.object(for: try request("/html"), serializer: JSONResponseSerializer())
            XCTFail("HTML is not JSON")
        } catch let error as SerializationError {
            XCTAssertEqual(error.response?.statusCode, 200)
            XCTAssertNotNil(error.data)
        }
    }
}

/// Records element names as an `XMLParser` reports them.
private final class ElementCounter: NSObject, XMLParserDelegate {
    var names: [String] = []

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
        qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]
    ) {
        names.append(elementName)
    }
}
