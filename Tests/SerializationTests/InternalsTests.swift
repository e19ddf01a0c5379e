import Foundation
import XCTest
@testable import Serialization

/// Tests of internal helpers (needs a debug build for `@testable`).
final class InternalsTests: XCTestCase {
    func testAcceptLanguageFromEnvironment() {
        XCTAssertEqual(DefaultHTTPHeaders.acceptLanguage(environment: ["LANG": "en_US.UTF-8"]), "en-US;q=1")
        XCTAssertEqual(DefaultHTTPHeaders.acceptLanguage(environment: ["LANG": "C.UTF-8"]), "en;q=1")
        XCTAssertEqual(DefaultHTTPHeaders.acceptLanguage(environment: [:]), "en;q=1")
        XCTAssertEqual(
            DefaultHTTPHeaders.acceptLanguage(environment: ["LANGUAGE": "fr_CA:fr:en", "LANG": "de_DE.UTF-8@euro"]),
            "fr-CA;q=1, fr;q=0.9, en;q=0.8, de-DE;q=0.7")
        XCTAssertEqual(DefaultHTTPHeaders.acceptLanguage(environment: ["LC_ALL": "pt_BR", "LANG": "en_US"]), "pt-BR;q=1")
        XCTAssertEqual(
            DefaultHTTPHeaders.acceptLanguage(environment: ["LANGUAGE": "a1:b2:c3:d4:e5:f6:g7:h8:ja:ko:zh:ru:it:es:nl"]),
            "ja;q=1, ko;q=0.9, zh;q=0.8, ru;q=0.7, it;q=0.6, es;q=0.5")
        XCTAssertNil(DefaultHTTPHeaders.languageTag(fromLocale: "POSIX"))
    }

    func testBoundaryCollidingWithInMemoryDataIsReplaced() throws {
        let builder = MultipartFormDataBuilder(stringEncoding: .utf8)
        let original = builder.boundary
        builder.appendPart(withFormData: Data("prefix \(original) suffix".utf8), name: "trap")
        let stream = builder.makeBodyStream()
        XCTAssertNotEqual(stream.boundary, original)
        let body = try drain(stream)
        let parts = try parseMultipart(body, boundary: stream.boundary)
        XCTAssertEqual(parts.count, 1)
        XCTAssertEqual(parts[0].body, Data("prefix \(original) suffix".utf8))
    }

    func testBoundaryHas192RandomBits() {
        let boundary = MultipartFormDataBuilder.makeBoundary()
        XCTAssertTrue(boundary.hasPrefix("Curlew-Boundary-"))
        let hex = boundary.dropFirst("Curlew-Boundary-".count)
        XCTAssertEqual(hex.count, 48)
        XCTAssertTrue(hex.allSatisfy(\.isHexDigit))
    }

    func testHeaderValidation() {
        for byte in UInt8(0)...UInt8(255) {
            let value = "a" + String(decoding: [byte], as: UTF8.self) + "b"
            let expectValid = byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
            XCTAssertEqual(HTTPHeaderValidation.isValidValue(value), expectValid, "byte \(byte)")
        }
        XCTAssertTrue(HTTPHeaderValidation.isToken("X-Custom_Header.1"))
        XCTAssertFalse(HTTPHeaderValidation.isToken("Bad:Name"))
        XCTAssertFalse(HTTPHeaderValidation.isToken(""))
        XCTAssertTrue(HTTPHeaderValidation.isToken("Name: value".prefix(4)))
        XCTAssertTrue(HTTPHeaderValidation.isValidValue("tab\tinside and \ttrailing\t"))
        XCTAssertTrue(HTTPHeaderValidation.isValidValue("caf\u{E9} \u{1F426}"))  // obs-text bytes
        for control in ["\r", "\n", "\0", "\u{1}", "\u{8}", "\u{B}", "\u{C}", "\u{1B}", "\u{1F}", "\u{7F}"] {
            XCTAssertFalse(HTTPHeaderValidation.isValidValue("a\(control)b"), control.debugDescription)
            XCTAssertThrowsError(try HTTPHeaderValidation.validate(field: "X", value: "a\(control)b"))
        }
    }

    func testTokenBytesAreRFC9110Tchars() {
        let tchars = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8(0)...UInt8(255) {
            XCTAssertEqual(HTTPHeaderValidation.isTokenByte(byte), tchars.contains(byte), "byte \(byte)")
        }
        XCTAssertFalse(HTTPHeaderValidation.isToken("caf\u{E9}"))
    }

    func testURLStringsRefuseSpacesAndControls() {
        for byte in UInt8(0)..<UInt8(0x80) {
            let string = "http://e.com/a" + String(UnicodeScalar(byte)) + "b"
            XCTAssertEqual(HTTPHeaderValidation.isValidURLString(string), byte > 0x20 && byte != 0x7F, "byte \(byte)")
        }
    }

    func testOptionalFlatteningLooksThroughEveryLayer() {
        let none: Int? = nil
        let nestedNone: Int?? = .some(nil)
        let nestedSome: Int?? = 3
        XCTAssertNil(OptionalFlattening.unwrapped(none as Any))
        XCTAssertNil(OptionalFlattening.unwrapped(nestedNone as Any))
        XCTAssertEqual(OptionalFlattening.unwrapped(nestedSome as Any) as? Int, 3)
        XCTAssertEqual(OptionalFlattening.unwrapped(5) as? Int, 5)
        XCTAssertTrue(OptionalFlattening.isNone(nestedNone as Any))
        XCTAssertFalse(OptionalFlattening.isNone(NSNull()))
        XCTAssertFalse(OptionalFlattening.isNone(JSONValue.null))
        let boxedNone: any Sendable = nestedNone
        XCTAssertNil(OptionalFlattening.nonNone(boxedNone))
        let boxedSome: any Sendable = nestedSome
        XCTAssertEqual(OptionalFlattening.nonNone(boxedSome) as? Int, 3)
    }
}
