import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import SessionCore

final class ResponseHeadParserTests: XCTestCase {
    private let url = URL(fileURLWithPath: "/")

    private func feed(_ parser: inout ResponseHeadParser, _ lines: [String]) -> [ResponseHeadParser.Event] {
        lines.map { line in Array(line.utf8).withUnsafeBytes { parser.consume($0) } }
    }

    func testFinalHeadWithRepeatedFields() throws {
        var parser = ResponseHeadParser(maximumBytes: 1024)
        let events = feed(&parser, ["HTTP/1.1 200 OK\r\n", "Content-Type: text/plain\r\n", "Vary: A\r\n", "vary: B\r\n", "\r\n"])
        XCTAssertEqual(events.last, .headComplete)
        XCTAssertEqual(parser.statusCode, 200)
        XCTAssertEqual(parser.httpVersion, "HTTP/1.1")
        let head = parser.makeHead(url: try XCTUnwrap(URL(string: "http://example.test/")))
        XCTAssertEqual(head.value(forHTTPHeaderField: "VARY"), "A, B")
        XCTAssertEqual(head.values(forHTTPHeaderField: "vary"), ["A", "B"])
        XCTAssertEqual(head.headerDictionary["Vary"], "A, B")
        let response = try XCTUnwrap(head.httpURLResponse)
        XCTAssertEqual(response.value(forHTTPHeaderField: "content-type"), "text/plain")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Vary"), "A, B")
        XCTAssertTrue(head.httpURLResponse === response, "built once, then kept")
    }

    /// The framing facts noted while parsing answer as the head's own lookups do, and defer
    /// to them (nil) when a field is repeated.
    /// Whether libcurl closes the connection after the answer, as http.c decides it: the token
    /// `close` in any `Connection` field (any case, among others), HTTP/1.0 unless
    /// `keep-alive`, an HTTP/1.1 body with neither a length nor a transfer coding; never for
    /// HTTP/2.
    func testWhetherTheConnectionClosesAfterTheAnswer() throws {
        let cases: [(status: String, lines: [String], closes: Bool)] = [
            ("HTTP/1.1 200 OK", ["Content-Length: 5"], false),
            ("HTTP/1.1 200 OK", ["Content-Length: 5", "Connection: close"], true),
            ("HTTP/1.1 200 OK", ["Content-Length: 5", "connection: Upgrade, CLOSE "], true),
            ("HTTP/1.1 200 OK", ["Content-Length: 5", "Connection: keep-alive", "Connection: close"], true),
            ("HTTP/1.1 200 OK", ["Content-Length: 5", "Connection: closed"], false),
            ("HTTP/1.1 200 OK", ["Content-Length: 5", "X-Connection: close"], false),
            ("HTTP/1.1 200 OK", ["Content-Length: 5", "Proxy-Connection: close"], true),
            ("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked"], false),
            ("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked", "Connection: close"], true),
            ("HTTP/1.1 200 OK", [], true),
            ("HTTP/1.1 200 OK", ["Content-Length: x"], true),
            ("HTTP/1.0 200 OK", ["Content-Length: 5"], true),
            ("HTTP/1.0 200 OK", ["Content-Length: 5", "Connection: Keep-Alive"], false),
            ("HTTP/1.0 200 OK", ["Connection: keep-alive, close"], true),
            ("HTTP/2 200", [], false),
            ("HTTP/2 200", ["Connection: close"], false),
        ]
        for (status, lines, closes) in cases {
            var parser = ResponseHeadParser(maximumBytes: 1024)
            let events = feed(&parser, [status + "\r\n"] + lines.map { $0 + "\r\n" } + ["\r\n"])
            XCTAssertEqual(events.last, .headComplete, "\(status) \(lines)")
            XCTAssertEqual(parser.closesConnection, closes, "\(status) \(lines)")
        }
    }

    func testContentLengthAndCodingAreNotedAsTheHeadReadsThem() throws {
        let cases: [(lines: [String], length: Int64?, coded: Bool?)] = [
            (["Content-Length: 100"], 100, false),
            (["content-LENGTH:  42 ", "Content-Encoding: gzip"], 42, true),
            (["Content-Encoding: IDENTITY"], -1, false),
            (["Content-Encoding: "], -1, true),
            (["Content-Length: 12a"], -1, false),
            (["Content-Length: 1234567890123456789"], -1, false),
            (["Content-Length: 1", " 0"], -1, false),  // folded: "1 0" is not a number
            (["Content-Length: 5", "Content-Length: 5"], nil, false),
            (["Content-Encoding: identity", "Content-Encoding: identity"], -1, nil),
            (["Content-Lengths: 5", "X-Content-Encoding: br"], -1, false),
        ]
        for (lines, length, coded) in cases {
            var parser = ResponseHeadParser(maximumBytes: 1024)
            let events = feed(&parser, ["HTTP/1.1 200 OK\r\n"] + lines.map { $0 + "\r\n" } + ["\r\n"])
            XCTAssertEqual(events.last, .headComplete, "\(lines)")
            XCTAssertEqual(parser.expectedContentLength, length, "\(lines)")
            XCTAssertEqual(parser.hasContentCoding, coded, "\(lines)")
            let head = parser.makeHead(url: url)
            if let length { XCTAssertEqual(head.expectedContentLength, length, "\(lines)") }
            if let coded {
                let lookup = head.value(forHTTPHeaderField: "Content-Encoding").map { $0.lowercased() != "identity" } ?? false
                XCTAssertEqual(lookup, coded, "\(lines)")
            }
        }
    }

    func testInterimResponsesAreSkipped() {
        var parser = ResponseHeadParser(maximumBytes: 1024)
        let events = feed(&parser, [
            "HTTP/1.1 100 Continue\r\n", "\r\n",
            "HTTP/1.1 103 Early Hints\r\n", "Link: </a.css>\r\n", "\r\n",
            "HTTP/2 201\r\n", "Location: /x\r\n", "\r\n",
        ])
        XCTAssertEqual(events.filter { $0 == .headComplete }.count, 1)
        XCTAssertEqual(parser.statusCode, 201)
        XCTAssertEqual(parser.httpVersion, "HTTP/2")
        XCTAssertNil(parser.makeHead(url: url).value(forHTTPHeaderField: "Link"), "interim fields do not leak into the final head")
    }

    func testAStatusLineAfterACompleteHeadStartsTheNextResponse() throws {
        // libcurl's Digest pass: 401 (its body ignored by curl), then the answer, in one transfer.
        var parser = ResponseHeadParser(maximumBytes: 1024)
        let events = feed(&parser, [
            "HTTP/1.1 401 Unauthorized\r\n", "WWW-Authenticate: Digest realm=\"r\", nonce=\"n\"\r\n", "\r\n",
            "HTTP/1.1 200 OK\r\n", "Content-Type: text/plain\r\n", "\r\n",
            "Trailer-Field: ignored\r\n",
        ])
        XCTAssertEqual(events, [.needMore, .needMore, .headComplete, .nextResponse, .needMore, .headComplete, .needMore])
        XCTAssertEqual(parser.statusCode, 200)
        let head = parser.makeHead(url: try XCTUnwrap(URL(string: "http://example.test/")))
        XCTAssertNil(head.value(forHTTPHeaderField: "WWW-Authenticate"))
        XCTAssertEqual(head.fieldCount, 1)
    }

    func testObsoleteLineFoldingJoinsTheValue() {
        var parser = ResponseHeadParser(maximumBytes: 1024)
        _ = feed(&parser, ["HTTP/1.1 200 OK\r\n", "X-Long: first\r\n", "\t second\r\n", "\r\n"])
        XCTAssertEqual(parser.makeHead(url: url).value(forHTTPHeaderField: "X-Long"), "first second")
    }

    func testMalformedHeadsAreInvalid() {
        for lines in [
            ["Content-Type: x\r\n"],  // field before status line
            ["HTTP/1.1 2000 OK\r\n"],  // four-digit status
            ["HTTP/1.1 abc\r\n"],
            ["HTTP/1.1 200 OK\r\n", "no colon here\r\n"],
            ["HTTP/1.1 200 OK\r\n", "Bad Name: x\r\n"],
            ["\r\n"],
        ] {
            var parser = ResponseHeadParser(maximumBytes: 1024)
            let events = feed(&parser, lines)
            guard case .invalid? = events.last else { return XCTFail("\(lines) gave \(events)") }
        }
    }

    /// The parser's own token table against RFC 9110's `tchar` as `HTTPHeaderValidation` has it:
    /// every byte value inside a field name, and the name kept as sent when it is valid.
    func testEveryByteOfAFieldNameIsJudgedAsRFC9110Says() {
        for byte in UInt8.min...UInt8.max where byte != UInt8(ascii: ":") {
            let parser = ResponseHeadParser(maximumBytes: 1024)
            _ = Array("HTTP/1.1 200 OK\r\n".utf8).withUnsafeBytes { parser.consume($0) }
            let event = ([UInt8(ascii: "X"), byte, UInt8(ascii: "Y")] + Array(": v\r\n".utf8)).withUnsafeBytes { parser.consume($0) }
            if HTTPHeaderValidation.isTokenByte(byte) {
                XCTAssertEqual(event, .needMore, "byte \(byte)")
                XCTAssertEqual(parser.fieldCount, 1, "byte \(byte)")
            } else {
                XCTAssertEqual(event, .invalid("invalid header field name"), "byte \(byte)")
            }
        }
    }

    func testHeadOverTheLimitIsTooLarge() {
        var parser = ResponseHeadParser(maximumBytes: 64)
        let events = feed(&parser, ["HTTP/1.1 200 OK\r\n", "X-A: \(String(repeating: "a", count: 60))\r\n"])
        XCTAssertEqual(events.last, .tooLarge)
    }

    func testTrailersAfterTheHeadAreIgnored() {
        var parser = ResponseHeadParser(maximumBytes: 1024)
        _ = feed(&parser, ["HTTP/1.1 200 OK\r\n", "\r\n"])
        XCTAssertEqual(feed(&parser, ["X-Trailer: 1\r\n", "\r\n"]), [.needMore, .needMore])
        XCTAssertNil(parser.makeHead(url: url).value(forHTTPHeaderField: "X-Trailer"))
    }

    func testValuesAreTrimmedAndControlBytesBecomeSpaces() {
        var parser = ResponseHeadParser(maximumBytes: 1024)
        _ = feed(&parser, ["HTTP/1.1 200 OK\r\n", "X-A: \t spaced out \t\r\n", "X-B: a\u{0}b\rc\r\n", "X-C:\r\n", "\r\n"])
        let head = parser.makeHead(url: url)
        XCTAssertEqual(head.value(forHTTPHeaderField: "x-a"), "spaced out")
        XCTAssertEqual(head.value(forHTTPHeaderField: "X-B"), "a b c", "no value can carry a line break onwards")
        XCTAssertEqual(head.value(forHTTPHeaderField: "X-C"), "")
        XCTAssertNil(head.value(forHTTPHeaderField: "X-D"))
    }

    /// Values are checked eight bytes at a time: a control byte or DEL at every position of
    /// values around the word size is still found, and tabs and bytes over 0x7F are kept.
    func testEveryControlByteIsFoundWhateverItsPosition() {
        for length in [1, 7, 8, 9, 15, 16, 17, 24] {
            for position in 0..<length {
                // (A CR just before the CRLF belongs to the line ending.)
                for bad: UInt8 in [0x00, 0x01, 0x0D, 0x1F, 0x7F] where !(bad == 0x0D && position == length - 1) {
                    var value = [UInt8](repeating: UInt8(ascii: "v"), count: length)
                    value[position] = bad
                    let parser = ResponseHeadParser(maximumBytes: 1024)
                    for line in [Array("HTTP/1.1 200 OK\r\n".utf8), Array("X-V: ".utf8) + value + [0x0D, 0x0A], [0x0D, 0x0A]] {
                        _ = line.withUnsafeBytes { parser.consume($0) }
                    }
                    let head = parser.makeHead(url: url)
                    let expected = String(decoding: value.map { $0 == bad ? UInt8(0x20) : $0 }, as: UTF8.self)
                    XCTAssertEqual(head.value(forHTTPHeaderField: "X-V"), expected, "length \(length), byte \(bad) at \(position)")
                }
            }
        }
        var parser = ResponseHeadParser(maximumBytes: 1024)
        _ = feed(&parser, ["HTTP/1.1 200 OK\r\n", "X-T: a\tb\tc\td\te\tf\tg\th\ti\r\n", "X-U: caf\u{E9} na\u{EF}ve \u{1F426}\r\n", "\r\n"])
        let head = parser.makeHead(url: url)
        XCTAssertEqual(head.value(forHTTPHeaderField: "X-T"), "a\tb\tc\td\te\tf\tg\th\ti", "tabs stay")
        XCTAssertEqual(head.value(forHTTPHeaderField: "X-U"), "caf\u{E9} na\u{EF}ve \u{1F426}", "bytes over 0x7F stay")
    }

    func testStatusLineForms() {
        for (line, code, version) in [
            ("HTTP/1.1 204 No Content\r\n", 204, "HTTP/1.1"), ("HTTP/2 200\r\n", 200, "HTTP/2"),
            ("HTTP/1.0 404 Not  Found\r\n", 404, "HTTP/1.0"), ("HTTP/3 999 x\r\n", 999, "HTTP/3"),
        ] {
            var parser = ResponseHeadParser(maximumBytes: 1024)
            XCTAssertEqual(feed(&parser, [line, "\r\n"]), [.needMore, .headComplete], line)
            XCTAssertEqual(parser.statusCode, code, line)
            XCTAssertEqual(parser.httpVersion, version, line)
        }
        for line in ["HTTP/1.1 20 OK\r\n", "HTTP/1.1 099 x\r\n", "HTTP/1.1 2x0\r\n", "HTTP/1.1\r\n", "HTTP/1.1 200OK\r\n"] {
            var parser = ResponseHeadParser(maximumBytes: 1024)
            guard case .invalid? = feed(&parser, [line]).last else { return XCTFail(line) }
        }
    }

    func testTheHeadAnswersWhatHTTPURLResponseWouldWithoutBuildingIt() throws {
        var parser = ResponseHeadParser(maximumBytes: 4096)
        _ = feed(&parser, [
            "HTTP/1.1 200 OK\r\n", "Content-Type: Application/JSON; Charset=\"UTF-8\"\r\n", "Content-Length: 42\r\n",
            "Set-Cookie: a=1\r\n", "Set-Cookie: b=2\r\n", "x-lower: kept\r\n", "\r\n",
        ])
        let head = parser.makeHead(url: try XCTUnwrap(URL(string: "http://example.test/a")))
        XCTAssertEqual(head.mimeType, "application/json")
        XCTAssertEqual(head.textEncodingName, "utf-8")
        XCTAssertEqual(head.expectedContentLength, 42)
        XCTAssertEqual(head.values(forHTTPHeaderField: "set-cookie"), ["a=1", "b=2"])
        XCTAssertEqual(head.fieldCount, 5)
        let response = try XCTUnwrap(head.httpURLResponse)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(response.mimeType, head.mimeType)
        XCTAssertEqual(response.expectedContentLength, head.expectedContentLength)
        XCTAssertEqual(response.value(forHTTPHeaderField: "X-Lower"), "kept")
    }

    func testContentLengthEdgeValues() {
        func length(_ values: [String]) -> Int64 {
            var parser = ResponseHeadParser(maximumBytes: 4096)
            _ = feed(&parser, ["HTTP/1.1 200 OK\r\n"] + values.map { "Content-Length: \($0)\r\n" } + ["\r\n"])
            return parser.makeHead(url: url).expectedContentLength
        }
        XCTAssertEqual(length([]), -1)
        XCTAssertEqual(length(["0"]), 0)
        XCTAssertEqual(length(["7", "7"]), 7, "repeated, equal")
        XCTAssertEqual(length(["7", "8"]), -1, "repeated, conflicting")
        XCTAssertEqual(length(["-1"]), -1)
        XCTAssertEqual(length(["12a"]), -1)
        XCTAssertEqual(length([""]), -1)
        XCTAssertEqual(length(["999999999999999999"]), 999_999_999_999_999_999)
        XCTAssertEqual(length(["99999999999999999999999"]), -1, "too large is unknown, not a crash")
    }
}
