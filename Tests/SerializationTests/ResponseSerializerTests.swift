import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(FoundationXML)
import FoundationXML
#endif
import XCTest
import Serialization

final class ResponseSerializerTests: XCTestCase {
    let garbage: [Data] = [
        Data("{\"a\": ".utf8), Data("<html><body>oops".utf8), Data([0xFF, 0xFE, 0x00, 0x80, 0xC3]),
        Data("not json at all".utf8), Data("bplist00garbage".utf8), Data("<?xml version=\"1.0\"?><a><b></a>".utf8),
    ]

    // MARK: HTTPResponseSerializer

    func testHTTPResponseSerializerValidation() throws {
        let serializer = HTTPResponseSerializer()
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(), data: Data("x".utf8)), Data("x".utf8))
        XCTAssertNil(try serializer.responseObject(for: makeResponse(status: 204), data: nil))
        XCTAssertEqual(try serializer.responseObject(for: nil, data: Data()), Data())
        let body = Data("not found".utf8)
        let response = makeResponse(status: 404, contentType: "text/plain")
        assertSerializationError(try serializer.responseObject(for: response, data: body)) { error in
            guard case .unacceptableStatusCode(let code, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(code, 404)
            XCTAssertEqual(error.response?.statusCode, 404)
            XCTAssertEqual(error.data, body)
            XCTAssertTrue(error.description.contains("404"), error.description)
            XCTAssertEqual(error.errorDescription, error.description)
        }
    }

    func testContentTypeValidation() throws {
        var serializer = HTTPResponseSerializer()
        serializer.acceptableContentTypes = ["application/json"]
        XCTAssertNoThrow(try serializer.validate(makeResponse(contentType: "Application/JSON; charset=utf-8"), data: nil))
        XCTAssertNoThrow(try serializer.validate(makeResponse(), data: Data()))   // no type, no body
        let body = Data("<p>".utf8)
        assertSerializationError(try serializer.validate(makeResponse(contentType: "text/html"), data: body)) { error in
            guard case .unacceptableContentType(let type, let acceptable, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(type, "text/html")
            XCTAssertEqual(acceptable, ["application/json"])
            XCTAssertEqual(error.data, body)
            XCTAssertTrue(error.description.contains("text/html"), error.description)
        }
        assertSerializationError(try serializer.validate(makeResponse(), data: body))
        serializer.acceptableStatusCodes = IndexSet([200, 404])
        XCTAssertNoThrow(try serializer.validate(makeResponse(status: 404, contentType: "application/json"), data: nil))
    }

    // MARK: JSON

    func testJSONResponseSerializer() throws {
        let serializer = JSONResponseSerializer()
        let response = makeResponse(contentType: "application/json")
        let value = try serializer.responseObject(for: response, data: Data(#"{"a":[1,2.5,true,null,"s"],"b":{"c":null}}"#.utf8))
        XCTAssertEqual(value, ["a": [1, 2.5, true, nil, "s"], "b": ["c": nil]])
        XCTAssertEqual(value?["a"]?[0], .int(1))
        XCTAssertEqual(value?["a"]?[2], .bool(true))

        var removing = serializer
        removing.removesKeysWithNullValues = true
        let cleaned = try removing.responseObject(
            for: response, data: Data(#"{"a":[null,{"x":null,"y":[null,1]}],"b":{"c":null,"d":1}}"#.utf8))
        XCTAssertEqual(cleaned, ["a": [["y": [1]]], "b": ["d": 1]])
        XCTAssertEqual(try removing.responseObject(for: response, data: Data("[null,1,null]".utf8)), [1])
    }

    func testJSONEmptyAndWhitespaceBodiesAreNil() throws {
        let serializer = JSONResponseSerializer()
        for body in [nil, Data(), Data(" ".utf8), Data(" \n\t\r ".utf8)] {
            XCTAssertNil(try serializer.responseObject(for: makeResponse(status: 200, contentType: "application/json"), data: body))
            XCTAssertNil(try serializer.responseObject(for: makeResponse(status: 204), data: body))
        }
    }

    func testJSONGarbageThrowsWithData() {
        let serializer = JSONResponseSerializer()
        for body in garbage {
            assertSerializationError(try serializer.responseObject(for: makeResponse(contentType: "application/json"), data: body)) {
                guard case .invalidBody(.json, _, let data, let underlying) = $0 else { return XCTFail("\($0)") }
                XCTAssertEqual(data, body)
                XCTAssertNotNil(underlying)
            }
        }
        assertSerializationError(try serializer.responseObject(for: makeResponse(contentType: "application/json"),
                                                               data: Data("42".utf8)))
        var fragments = serializer
        fragments.readingOptions = [.fragmentsAllowed]
        XCTAssertEqual(try fragments.responseObject(for: nil, data: Data("42".utf8)), .int(42))
        // Wrong content type is checked before parsing.
        assertSerializationError(try serializer.responseObject(for: makeResponse(contentType: "text/html"),
                                                               data: Data("{}".utf8))) {
            guard case .unacceptableContentType = $0 else { return XCTFail("\($0)") }
        }
    }

    // MARK: Decodable

    struct User: Decodable, Equatable { let id: Int; let name: String }

    func testDecodableResponseSerializer() throws {
        let serializer = DecodableResponseSerializer<User>()
        let response = makeResponse(contentType: "application/json")
        XCTAssertEqual(try serializer.responseObject(for: response, data: Data(#"{"id":1,"name":"a"}"#.utf8)),
                       User(id: 1, name: "a"))
        for body in garbage + [Data(" ".utf8), Data(#"{"id":"x"}"#.utf8)] {
            assertSerializationError(try serializer.responseObject(for: response, data: body)) {
                guard case .invalidBody(.decodable, _, let data, _) = $0 else { return XCTFail("\($0)") }
                XCTAssertEqual(data, body)
            }
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        struct Snake: Decodable, Equatable { let userName: String }
        let snake = DecodableResponseSerializer<Snake>(decoder: decoder)
        XCTAssertEqual(try snake.responseObject(for: response, data: Data(#"{"user_name":"z"}"#.utf8)), Snake(userName: "z"))
    }

    func testDecodableEmptyBodies() throws {
        let users = DecodableResponseSerializer<User>()
        let empty = DecodableResponseSerializer<Empty>()
        // 200 with an empty body: an error for both.
        assertSerializationError(try users.responseObject(for: makeResponse(), data: Data())) {
            guard case .emptyResponseBody = $0 else { return XCTFail("\($0)") }
        }
        assertSerializationError(try empty.responseObject(for: makeResponse(), data: nil))
        // 204/205 and HEAD: Empty succeeds, other types still fail.
        XCTAssertEqual(try empty.responseObject(for: makeResponse(status: 204), data: nil), Empty.value)
        XCTAssertEqual(try empty.responseObject(for: makeResponse(status: 205), data: Data()), Empty())
        var head = URLRequest(url: URL(fileURLWithPath: "/"))
        head.httpMethod = "HEAD"
        XCTAssertEqual(try empty.responseObject(for: head, response: makeResponse(), data: Data()), Empty())
        assertSerializationError(try users.responseObject(for: makeResponse(status: 204), data: nil))
    }

    // MARK: String

    func testStringResponseSerializerEncodings() throws {
        let serializer = StringResponseSerializer()
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain"), data: Data("héllo".utf8)), "héllo")
        let latin1 = Data([0x68, 0xE9, 0x6C, 0x6C, 0x6F])   // "héllo" in ISO-8859-1
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain; charset=ISO-8859-1"),
                                                     data: latin1), "héllo")
        // No charset: UTF-8 fails, ISO-8859-1 is the fallback.
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain"), data: latin1), "héllo")
        // A declared UTF-8 charset that does not match the bytes is an error carrying the data.
        assertSerializationError(try serializer.responseObject(
            for: makeResponse(contentType: "text/plain; charset=\"utf-8\""), data: latin1)) {
            guard case .invalidBody(.string, _, let data, _) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(data, latin1)
        }
        var forced = serializer
        forced.encoding = .utf16LittleEndian
        XCTAssertEqual(try forced.responseObject(for: nil, data: Data([0x68, 0x00, 0x69, 0x00])), "hi")
        var strictUTF8 = serializer
        strictUTF8.encoding = .utf8
        for body in garbage where String(data: body, encoding: .utf8) == nil {
            assertSerializationError(try strictUTF8.responseObject(for: makeResponse(), data: body))
        }
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(), data: Data("   ".utf8)), "   ")
        // A charset Curlew does not decode: UTF-8 bytes are read as UTF-8; other bytes are an
        // error naming it (until 2026-11-28 they became Latin-1 mojibake: GBK "你好" as "ÄãºÃ").
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain; charset=gbk"), data: Data("hi 你好".utf8)), "hi 你好")
        let gbk = Data([0xC4, 0xE3, 0xBA, 0xC3])
        assertSerializationError(try serializer.responseObject(for: makeResponse(contentType: "text/plain; charset=gbk"), data: gbk)) {
            guard case .invalidBody(.string, _, let data, let underlying) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(data, gbk)
            XCTAssertTrue("\(String(describing: underlying))".contains("'gbk'"), "\(String(describing: underlying))")
        }
    }

    /// A byte order mark names the encoding whatever the label says, and is not part of the
    /// text (WHATWG Encoding): a UTF-16 body with its mark and no charset was read as
    /// Latin-1 (`"ÿþh\0i\0"`), a UTF-8 one kept U+FEFF at the start.
    func testAByteOrderMarkNamesTheEncoding() throws {
        let serializer = StringResponseSerializer()
        let little = Data([0xFF, 0xFE, 0x68, 0x00, 0xE9, 0x00])
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain"), data: little), "hé")
        let big = Data([0xFE, 0xFF, 0x00, 0x68, 0x00, 0xE9])
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain; charset=iso-8859-1"), data: big), "hé")
        let utf8 = Data([0xEF, 0xBB, 0xBF]) + Data("hé".utf8)
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain; charset=utf-8"), data: utf8), "hé")
        var forced = serializer
        forced.encoding = .isoLatin1
        XCTAssertEqual(try forced.responseObject(for: nil, data: Data([0xFF, 0xFE, 0x68])), "ÿþh", "the caller's encoding wins")
    }

    func testStringEmptyBodies() throws {
        let serializer = StringResponseSerializer()
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(status: 204), data: nil), "")
        var head = URLRequest(url: URL(fileURLWithPath: "/"))
        head.httpMethod = "HEAD"
        XCTAssertEqual(try serializer.responseObject(for: head, response: makeResponse(), data: Data()), "")
        assertSerializationError(try serializer.responseObject(for: makeResponse(), data: Data())) {
            guard case .emptyResponseBody = $0 else { return XCTFail("\($0)") }
        }
    }

    // MARK: XML

    func testXMLParserResponseSerializer() throws {
        final class Collector: NSObject, XMLParserDelegate {
            var names: [String] = []
            func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                        qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
                names.append(elementName)
            }
        }
        let serializer = XMLParserResponseSerializer()
        let response = makeResponse(contentType: "application/xml")
        let parser = try serializer.responseObject(for: response, data: Data("<a><b/><c>t</c></a>".utf8))
        let collector = Collector()
        parser.delegate = collector
        XCTAssertTrue(parser.parse())
        XCTAssertEqual(collector.names, ["a", "b", "c"])
        for body in [Data("<a><b>".utf8), Data("<?xml version=\"1.0\"?><a><b></a>".utf8), Data("not xml".utf8),
                     Data([0xFF, 0x00, 0x3C])] {
            assertSerializationError(try serializer.responseObject(for: response, data: body)) {
                guard case .invalidBody(.xml, _, let data, _) = $0 else { return XCTFail("\($0)") }
                XCTAssertEqual(data, body)
            }
        }
        for body in [nil, Data()] {
            assertSerializationError(try serializer.responseObject(for: response, data: body)) {
                guard case .emptyResponseBody = $0 else { return XCTFail("\($0)") }
            }
        }
        assertSerializationError(try serializer.responseObject(for: response, data: Data("  ".utf8)))
        assertSerializationError(try serializer.sendableResponseObject(for: nil, response: response, data: Data("<a/>".utf8))) {
            guard case .outputNotSendable = $0 else { return XCTFail("\($0)") }
        }
    }

    /// A response's external entity (XXE) is never loaded: libxml2 substituted it, reading a
    /// local file into the document (or fetching a URL the caller never asked for), because
    /// FoundationXML turns entity substitution on unless the options forbid external entities.
    func testTheXMLDocumentSerializerLoadsNoExternalEntity() throws {
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-xxe-\(UUID().uuidString)")
        try Data("curlew-secret-marker".utf8).write(to: secret)
        defer { try? FileManager.default.removeItem(at: secret) }
        let body = Data("""
            <?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "\(secret.absoluteString)">]><r>&x;</r>
            """.utf8)
        for options in [[], [.nodePreserveWhitespace], [.nodeLoadExternalEntitiesAlways]] as [XMLNode.Options] {
            var serializer = XMLDocumentResponseSerializer()
            serializer.options = options
            let document = try serializer.responseObject(for: makeResponse(contentType: "text/xml"), data: body)
            XCTAssertEqual(document.rootElement()?.name, "r")
            XCTAssertFalse(document.xmlString.contains("curlew-secret-marker"), "the file was read into the document")
        }
    }

    /// A UTF-32 byte order mark names UTF-32: `FF FE 00 00` was taken for UTF-16LE's mark and
    /// a NUL, and `A` came out as `\0A\0`.
    func testAUTF32ByteOrderMarkIsReadAsUTF32() throws {
        let serializer = StringResponseSerializer()
        let little = Data([0xFF, 0xFE, 0x00, 0x00, 0x41, 0x00, 0x00, 0x00])
        let big = Data([0x00, 0x00, 0xFE, 0xFF, 0x00, 0x00, 0x00, 0x42])
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain; charset=utf-32le"), data: little), "A")
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain"), data: big), "B")
        // UTF-16LE's mark before "A" (not whole 4-byte units after a NUL) stays UTF-16.
        XCTAssertEqual(try serializer.responseObject(for: makeResponse(contentType: "text/plain"), data: Data([0xFF, 0xFE, 0x41, 0x00])), "A")
    }

    /// An acceptable type written with parameters or in another case matches the response's
    /// media type: `application/json; charset=utf-8` refused every JSON response.
    func testAcceptableTypesWithParametersMatch() throws {
        var serializer = JSONResponseSerializer()
        serializer.acceptableContentTypes = ["Application/JSON; charset=utf-8"]
        let value = try serializer.responseObject(for: makeResponse(contentType: "application/json"), data: Data("{\"a\":1}".utf8))
        XCTAssertEqual(value?["a"]?.intValue, 1)
    }

    func testXMLDocumentResponseSerializer() throws {
        var serializer = XMLDocumentResponseSerializer()
        serializer.options = [.nodePreserveWhitespace]
        let response = makeResponse(contentType: "text/xml")
        let document = try serializer.responseObject(for: response, data: Data("<root><item id=\"1\">x</item></root>".utf8))
        XCTAssertEqual(document.rootElement()?.name, "root")
        XCTAssertEqual(document.rootElement()?.elements(forName: "item").first?.attribute(forName: "id")?.stringValue, "1")
        for body in [Data("<root><item>".utf8), Data("garbage".utf8), Data(" \n ".utf8)] {
            assertSerializationError(try serializer.responseObject(for: response, data: body)) {
                guard case .invalidBody(.xml, _, let data, _) = $0 else { return XCTFail("\($0)") }
                XCTAssertEqual(data, body)
            }
        }
        assertSerializationError(try serializer.responseObject(for: response, data: Data()))
        assertSerializationError(try serializer.responseObject(for: makeResponse(contentType: "application/json"),
                                                               data: Data("<a/>".utf8)))
    }

    // MARK: Property list

    func testPropertyListResponseSerializer() throws {
        let serializer = PropertyListResponseSerializer()
        let response = makeResponse(contentType: "application/x-plist")
        let plist: [String: Any] = ["name": "x", "n": 3, "flag": true, "list": [1.5, "s"], "when": Date(timeIntervalSince1970: 0),
                                    "blob": Data([1, 2])]
        for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
            let data = try PropertyListSerialization.data(fromPropertyList: plist, format: format, options: 0)
            let value = try XCTUnwrap(serializer.responseObject(for: response, data: data) as? [String: any Sendable])
            XCTAssertEqual(value["name"] as? String, "x")
            XCTAssertEqual(value["n"] as? Int, 3)
            XCTAssertEqual(value["flag"] as? Bool, true)
            XCTAssertEqual((value["list"] as? [any Sendable])?.first as? Double, 1.5)
            XCTAssertEqual(value["when"] as? Date, Date(timeIntervalSince1970: 0))
            XCTAssertEqual(value["blob"] as? Data, Data([1, 2]))
        }
        for body in garbage + [Data("   ".utf8)] {
            assertSerializationError(try serializer.responseObject(for: response, data: body)) {
                guard case .invalidBody(.propertyList, _, let data, _) = $0 else { return XCTFail("\($0)") }
                XCTAssertEqual(data, body)
            }
        }
        XCTAssertNil(try serializer.responseObject(for: response, data: Data()))
        XCTAssertNil(try serializer.responseObject(for: makeResponse(status: 204), data: nil))
        var openStep = serializer
        openStep.format = .openStep
        XCTAssertEqual(try openStep.responseObject(for: response, data: Data("{ a = b; }".utf8)) as? [String: String], ["a": "b"])
    }

    // MARK: Compound

    func testCompoundResponseSerializer() throws {
        var compound = CompoundResponseSerializer(responseSerializers: [JSONResponseSerializer(), StringResponseSerializer()])
        let json = try compound.responseObject(for: makeResponse(contentType: "application/json"), data: Data(#"{"a":1}"#.utf8))
        XCTAssertEqual(json as? JSONValue, ["a": 1])
        let text = try compound.responseObject(for: makeResponse(contentType: "text/plain"), data: Data("plain".utf8))
        XCTAssertEqual(text as? String, "plain")
        XCTAssertEqual(compound.responseSerializers.count, 2)

        // Nobody succeeds: raw data (AFNetworking), or the first error.
        var only = CompoundResponseSerializer(responseSerializers: [JSONResponseSerializer(), XMLParserResponseSerializer()])
        let raw = try only.responseObject(for: makeResponse(contentType: "application/json"), data: Data("{bad".utf8))
        XCTAssertEqual(raw as? Data, Data("{bad".utf8))
        only.fallsBackToData = false
        assertSerializationError(try only.responseObject(for: makeResponse(contentType: "application/json"), data: Data("{bad".utf8))) {
            guard case .invalidBody(.json, _, _, _) = $0 else { return XCTFail("\($0)") }
        }
        // Its own validation comes first.
        compound.acceptableStatusCodes = IndexSet([200])
        assertSerializationError(try compound.responseObject(for: makeResponse(status: 201, contentType: "application/json"),
                                                             data: Data("{}".utf8))) {
            guard case .unacceptableStatusCode(201, _, _) = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertNil(try CompoundResponseSerializer().responseObject(for: makeResponse(status: 204), data: nil))
    }

    func testSendableBoxing() throws {
        let serializer: any ResponseSerialization = JSONResponseSerializer()
        XCTAssertNil(try serializer.sendableResponseObject(for: nil, response: makeResponse(status: 204), data: nil))
        let boxed = try serializer.sendableResponseObject(for: nil, response: nil, data: Data("[1]".utf8))
        XCTAssertEqual(boxed as? JSONValue, [1])
        let http: any ResponseSerialization = HTTPResponseSerializer()
        XCTAssertEqual(try http.sendableResponseObject(for: nil, response: nil, data: Data("z".utf8)) as? Data, Data("z".utf8))
    }

    // MARK: Codable

    func testCodableRoundTrips() throws {
        var http = HTTPResponseSerializer()
        http.acceptableStatusCodes = IndexSet([200, 201, 304])
        http.acceptableContentTypes = ["text/plain"]
        let httpBack = try JSONDecoder().decode(HTTPResponseSerializer.self, from: JSONEncoder().encode(http))
        XCTAssertEqual(httpBack.acceptableStatusCodes, http.acceptableStatusCodes)
        XCTAssertEqual(httpBack.acceptableContentTypes, http.acceptableContentTypes)

        var json = JSONResponseSerializer()
        json.readingOptions = [.fragmentsAllowed]
        json.removesKeysWithNullValues = true
        json.acceptableContentTypes = nil
        let jsonBack = try PropertyListDecoder().decode(JSONResponseSerializer.self, from: PropertyListEncoder().encode(json))
        XCTAssertEqual(jsonBack.readingOptions, [.fragmentsAllowed])
        XCTAssertTrue(jsonBack.removesKeysWithNullValues)
        XCTAssertNil(jsonBack.acceptableContentTypes)
        XCTAssertEqual(jsonBack.acceptableStatusCodes, IndexSet(integersIn: 200..<300))

        var plist = PropertyListResponseSerializer()
        plist.format = .binary
        plist.readOptions = [.mutableContainers]
        let plistBack = try JSONDecoder().decode(PropertyListResponseSerializer.self, from: JSONEncoder().encode(plist))
        XCTAssertEqual(plistBack.format, .binary)
        XCTAssertEqual(plistBack.readOptions, [.mutableContainers])
        XCTAssertEqual(plistBack.acceptableContentTypes, ["application/x-plist"])

        // Missing keys keep the defaults.
        let defaults = try JSONDecoder().decode(JSONResponseSerializer.self, from: Data("{}".utf8))
        XCTAssertEqual(defaults.acceptableStatusCodes, IndexSet(integersIn: 200..<300))
        XCTAssertFalse(defaults.removesKeysWithNullValues)
    }

    func testCopiesDoNotShareState() {
        var a = JSONResponseSerializer()
        var b = a
        b.removesKeysWithNullValues = true
        a.acceptableStatusCodes = IndexSet([201])
        XCTAssertFalse(a.removesKeysWithNullValues)
        XCTAssertEqual(b.acceptableStatusCodes, IndexSet(integersIn: 200..<300))
    }
}
