import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import Serialization

final class JSONValueTests: XCTestCase {
    func testLiteralsSubscriptsAndAccessors() {
        let value: JSONValue = ["s": "x", "i": 3, "d": 2.5, "b": false, "n": nil, "a": [1, "two"], "o": ["k": true]]
        XCTAssertEqual(value["s"]?.stringValue, "x")
        XCTAssertEqual(value["i"]?.intValue, 3)
        XCTAssertEqual(value["i"]?.doubleValue, 3)
        XCTAssertEqual(value["d"]?.doubleValue, 2.5)
        XCTAssertNil(value["d"]?.intValue)
        XCTAssertEqual(value["b"]?.boolValue, false)
        XCTAssertEqual(value["n"]?.isNull, true)
        XCTAssertEqual(value["a"]?[1], "two")
        XCTAssertNil(value["a"]?[2])
        XCTAssertNil(value["a"]?[-1])
        XCTAssertEqual(value["a"]?.arrayValue?.count, 2)
        XCTAssertEqual(value["o"]?.objectValue, ["k": true])
        XCTAssertNil(value["missing"])
        XCTAssertNil(value[0])
        XCTAssertNil(JSONValue.string("x")["k"])
        XCTAssertEqual(JSONValue.double(4).intValue, 4)
        XCTAssertNotEqual(JSONValue.int(1), JSONValue.double(1))
    }

    func testCodableRoundTrip() throws {
        let value: JSONValue = ["big": .int(9_007_199_254_740_993), "list": [1, 1.5, "s", true, nil], "nested": ["x": []]]
        let data = try JSONEncoder().encode(value)
        XCTAssertEqual(try JSONDecoder().decode(JSONValue.self, from: data), value)
        XCTAssertEqual(try JSONDecoder().decode(JSONValue.self, from: Data("true".utf8)), .bool(true))
        XCTAssertEqual(try JSONDecoder().decode(JSONValue.self, from: Data("1".utf8)), .int(1))
    }

    func testConversionFromJSONSerialization() throws {
        let object = try JSONSerialization.jsonObject(
            with: Data(#"{"t":true,"f":false,"one":1,"zero":0,"pi":3.25,"big":9007199254740993,"n":null,"a":["x"]}"#.utf8))
        let value = try JSONValue(jsonObject: object)
        XCTAssertEqual(value["t"], .bool(true))
        XCTAssertEqual(value["f"], .bool(false))
        XCTAssertEqual(value["one"], .int(1))
        XCTAssertEqual(value["zero"], .int(0))
        XCTAssertEqual(value["pi"], .double(3.25))
        XCTAssertEqual(value["big"], .int(9_007_199_254_740_993))
        XCTAssertEqual(value["n"], .null)
        XCTAssertEqual(value["a"], ["x"])
        // And back.
        let back = try JSONSerialization.data(withJSONObject: value.jsonObject, options: [.sortedKeys])
        XCTAssertEqual(try JSONValue(jsonObject: JSONSerialization.jsonObject(with: back)), value)
        // Swift values.
        let none: Int? = nil
        XCTAssertEqual(try JSONValue(jsonObject: ["a": 1, "b": none as Any, "c": [true]] as [String: Any]),
                       ["a": 1, "b": nil, "c": [true]])
        XCTAssertThrowsError(try JSONValue(jsonObject: ["d": Date()]))
        XCTAssertThrowsError(try JSONValue(jsonObject: Double.infinity))
    }

    func testRemovingKeysWithNullValues() {
        // AFJSONObjectByRemovingKeysWithNullValues: null members and null array elements go,
        // at every depth; a top-level null or scalar is returned as it is.
        let value: JSONValue = [
            "a": nil, "b": [nil, ["c": nil, "d": 1], [nil, [nil]], 2, nil], "e": ["f": nil, "g": [nil, "h"]],
        ]
        XCTAssertEqual(value.removingKeysWithNullValues(), ["b": [["d": 1], [[]], 2], "e": ["g": ["h"]]])
        XCTAssertEqual(JSONValue.array([nil, nil]).removingKeysWithNullValues(), [])
        XCTAssertEqual(JSONValue.null.removingKeysWithNullValues(), .null)
        XCTAssertEqual(JSONValue.string("s").removingKeysWithNullValues(), "s")
    }

    func testErrorDescriptionsAreReadable() {
        let response = makeResponse(status: 500, contentType: "text/html")
        let errors: [SerializationError] = [
            .unacceptableStatusCode(500, response: response, data: Data("x".utf8)),
            .unacceptableContentType("text/html", acceptable: ["application/json"], response: response, data: nil),
            .emptyResponseBody(response: response),
            .invalidBody(.json, response: nil, data: Data("{".utf8), underlying: CocoaError(.propertyListReadCorrupt)),
            .invalidHeader(field: "X", value: "a\r\nb"),
            .invalidURL("bad url"),
            .multipartFileNotFound(URL(fileURLWithPath: "/tmp/missing.txt")),
        ]
        for error in errors {
            XCTAssertFalse(error.description.isEmpty)
            XCTAssertEqual(error.localizedDescription, error.description)
        }
        XCTAssertTrue(errors[0].description.contains("500"))
        XCTAssertTrue(errors[1].description.contains("text/html"))
        XCTAssertTrue(errors[1].description.contains("application/json"))
        XCTAssertTrue(errors[4].description.contains("\\r\\n"))
        XCTAssertTrue(errors[6].description.contains("missing.txt"))
        XCTAssertEqual(errors[0].response?.statusCode, 500)
        XCTAssertEqual(errors[0].data, Data("x".utf8))
    }
}
