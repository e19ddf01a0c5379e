import Foundation
import XCTest
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

final class QueryStringTests: XCTestCase {
    func testPercentEscapingKeepsUnreservedSlashAndQuestionMark() {
        XCTAssertEqual(percentEscapedString("AZaz09-._~/?"), "AZaz09-._~/?")
        XCTAssertEqual(percentEscapedString("a b"), "a%20b")
        XCTAssertEqual(percentEscapedString(":#[]@!$&'()*+,;="),
                       "%3A%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D")
        XCTAssertEqual(percentEscapedString("100%"), "100%25")
        XCTAssertEqual(percentEscapedString("\r\n\0"), "%0D%0A%00")
    }

    func testEmojiAndComposedCharactersAreEscapedWhole() {
        // Thumbs up with a skin-tone modifier: two scalars, one character.
        XCTAssertEqual(percentEscapedString("👍🏽"), "%F0%9F%91%8D%F0%9F%8F%BD")
        // Family emoji joined with ZWJ.
        let family = "👨‍👩‍👧"
        XCTAssertEqual(percentEscapedString(family).removingPercentEncoding, family)
        // NFC é and NFD e + combining acute keep their own bytes.
        XCTAssertEqual(percentEscapedString("\u{E9}"), "%C3%A9")
        XCTAssertEqual(percentEscapedString("e\u{301}"), "e%CC%81")
        // A long string of emoji (AFNetworking's batching bug #3028 split them at 50 UTF-16 units).
        let long = String(repeating: "a👍🏽", count: 60)
        XCTAssertEqual(percentEscapedString(long).removingPercentEncoding, long)
        XCTAssertEqual(percentEscapedString("日本語"), "%E6%97%A5%E6%9C%AC%E8%AA%9E")
    }

    func testKeysAreSorted() {
        XCTAssertEqual(queryString(from: ["b": "2", "a": "1", "c": "3"]), "a=1&b=2&c=3")
    }

    func testNestedDictionariesArraysAndSets() {
        let parameters: [String: any Sendable] = [
            "user": ["name": "ann", "address": ["city": "Oslo"]] as [String: any Sendable],
            "ids": [1, 2, 3],
            "tags": Set(["b", "a"]),
        ]
        XCTAssertEqual(
            queryString(from: parameters),
            "ids%5B%5D=1&ids%5B%5D=2&ids%5B%5D=3&tags=a&tags=b&user%5Baddress%5D%5Bcity%5D=Oslo&user%5Bname%5D=ann")
        XCTAssertEqual(queryString(from: ["a": ["b": "c"]]), "a%5Bb%5D=c")
        XCTAssertEqual(queryString(from: ["a": [[1, 2]]]), "a%5B%5D%5B%5D=1&a%5B%5D%5B%5D=2")
        XCTAssertEqual(queryString(from: ["a": [["x": 1]]]), "a%5B%5D%5Bx%5D=1")
        XCTAssertEqual(queryString(from: ["empty": [Int]()]), "")
    }

    func testScalarFormatting() {
        let none: String? = nil
        XCTAssertEqual(queryString(from: ["t": true, "f": false]), "f=0&t=1")
        XCTAssertEqual(queryString(from: ["d": 1.0, "e": 1.5, "i": -7]), "d=1&e=1.5&i=-7")
        XCTAssertEqual(queryString(from: ["n": NSNull(), "o": none]), "n&o")
        XCTAssertEqual(queryString(from: ["plus": "1+1=2", "amp": "a&b"]), "amp=a%26b&plus=1%2B1%3D2")
        XCTAssertEqual(queryString(from: ["": "empty-key"]), "=empty-key")
        XCTAssertEqual(queryString(from: ["emoji": "👍🏽"]), "emoji=%F0%9F%91%8D%F0%9F%8F%BD")
    }

    /// Numbers a `Double` alters go out with their own digits: `Float(0.1)` was sent as
    /// `0.10000000149011612`, `UInt64.max` as `1.8446744073709552e%2B19`, a long `Decimal`
    /// rounded. A JSON or property-list body, which has no such number, refuses the last two.
    func testNumbersKeepTheirDigits() throws {
        XCTAssertEqual(queryString(from: ["p": Float(0.1), "lat": Float(52.52)]), "lat=52.52&p=0.1")
        XCTAssertEqual(queryString(from: ["id": UInt64.max, "u": UInt(Int.max) + 1]), "id=18446744073709551615&u=9223372036854775808")
        let decimal = try XCTUnwrap(Decimal(string: "12345678901234567.89"))
        XCTAssertEqual(queryString(from: ["d": decimal, "half": Decimal(string: "0.5")!]), "d=12345678901234567.89&half=0.5")
        XCTAssertEqual(queryString(from: ["n": NSNumber(value: Float(0.1)), "q": NSNumber(value: UInt64.max)]), "n=0.1&q=18446744073709551615")

        let json = JSONRequestSerializer()
        let request = try json.request(method: "POST", urlString: "https://e.com", parameters: ["p": Float(0.1), "half": Decimal(string: "0.5")!])
        let body = request.httpBody.map { String(decoding: $0, as: UTF8.self) } ?? ""
        XCTAssertTrue(body.contains("\"p\":0.1}") || body.contains("\"p\":0.1,"), body)
        XCTAssertTrue(body.contains("\"half\":0.5"), body)
        // A property list holds the UInt64 exactly.
        let plist = try PropertyListRequestSerializer().request(method: "POST", urlString: "https://e.com", parameters: ["n": UInt64.max])
        XCTAssertTrue(plist.httpBody.map { String(decoding: $0, as: UTF8.self) }?.contains("<integer>18446744073709551615</integer>") ?? false)
        // A JSON response with such an integer still parses (to the nearest Double).
        let parsed = try JSONResponseSerializer().responseObject(
            for: HTTPURLResponse(url: URL(string: "https://e.com")!, statusCode: 200, httpVersion: nil, headerFields: ["Content-Type": "application/json"]),
            data: Data("{\"id\":18446744073709551615}".utf8))
        XCTAssertEqual(parsed?["id"]?.doubleValue, 1.8446744073709552e19)
    }

    /// A nested `Encodable` that fails to encode (a NaN `JSONEncoder` refuses) fails the
    /// request: its debug description (`Loc(lat: nan)`) was sent as the value.
    func testANestedValueThatFailsToEncodeFailsTheRequest() {
        struct Loc: Encodable, Sendable { var lat: Double }
        XCTAssertThrowsError(try HTTPRequestSerializer().request(
            method: "GET", urlString: "https://e.com/find", parameters: ["loc": Loc(lat: .nan), "q": "x"])) {
            guard case .invalidParameters? = $0 as? SerializationError else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(queryString(from: ["a": Loc(lat: .nan), "token": "x"]), "token=x", "the other pairs are kept")
    }

    func testEncodableValuesInsideDictionaries() {
        struct Point: Encodable, Sendable { let x: Int; let y: Int }
        XCTAssertEqual(queryString(from: ["p": Point(x: 1, y: 2)]), "p%5Bx%5D=1&p%5By%5D=2")
    }

    /// A value that encodes to one value (a raw-value enum, a single-value wrapper) is written
    /// as that value: the case's name and the wrapper's `description` were written instead.
    func testSingleValueEncodablesAreWrittenAsTheValueTheyEncodeTo() {
        enum Sort: String, Encodable, Sendable { case ascending = "asc" }
        enum Level: Int, Encodable, Sendable { case high = 5 }
        struct UserID: Encodable, Sendable {
            let raw: Int
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode(raw)
            }
        }
        struct Nothing: Encodable, Sendable {
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encodeNil()
            }
        }
        XCTAssertEqual(queryString(from: ["sort": Sort.ascending]), "sort=asc")
        XCTAssertEqual(queryString(from: ["level": Level.high, "user": UserID(raw: 42)]), "level=5&user=42")
        XCTAssertEqual(queryString(from: ["sorts": [Sort.ascending, Sort.ascending]]), "sorts%5B%5D=asc&sorts%5B%5D=asc")
        XCTAssertEqual(queryString(from: ["none": Nothing()]), "none")
    }

    func testRoundTripThroughDecoding() {
        let values = ["a b", "ü", "👍🏽", "e\u{301}", "x&y=z", "100%", "/?#"]
        for value in values {
            let query = queryString(from: ["k": value])
            let decoded = query.dropFirst(2).removingPercentEncoding
            XCTAssertEqual(decoded, value)
        }
    }
}
