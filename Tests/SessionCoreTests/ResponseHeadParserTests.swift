import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import SessionCore

final class ResponseHeadParserTests: XCTestCase {
    private func feed(_ parser: inout ResponseHeadParser, _ lines: [String]) -> [ResponseHeadParser.Event] {
        lines.map { line in Array(line.utf8).withUnsafeBytes { parser.consume($0) } }
    }

    func testFinalHeadWithRepeatedFields() throws {
        var parser = ResponseHeadParser(maximumBytes: 1024)
        let events = feed(&parser, ["HTTP/1.1 200 OK\r\n", "Content-Type: text/plain\r\n", "Vary: A\r\n", "vary: B\r\n", "\r\n"])
        XCTAssertEqual(events.last, .headComplete)
        XCTAssertEqual(parser.statusCode, 200)
        XCTAssertEqual(parser.httpVersion, "HTTP/1.1")
        XCTAssertEqual(parser.headerDictionary["Vary"], "A, B")
        let response = try XCTUnwrap(parser.makeResponse(url: URL(string: "http://example.test/")!))
        XCTAssertEqual(response.value(forHTTPHeaderField: "content-type"), "text/plain")
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
        XCTAssertNil(parser.headerDictionary["Link"], "interim fields do not leak into the final head")
    }

    func testObsoleteLineFoldingJoinsTheValue() {
        var parser = ResponseHeadParser(maximumBytes: 1024)
        _ = feed(&parser, ["HTTP/1.1 200 OK\r\n", "X-Long: first\r\n", "\t second\r\n", "\r\n"])
        XCTAssertEqual(parser.headerDictionary["X-Long"], "first second")
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

    func testHeadOverTheLimitIsTooLarge() {
        var parser = ResponseHeadParser(maximumBytes: 64)
        let events = feed(&parser, ["HTTP/1.1 200 OK\r\n", "X-A: \(String(repeating: "a", count: 60))\r\n"])
        XCTAssertEqual(events.last, .tooLarge)
    }

    func testTrailersAfterTheHeadAreIgnored() {
        var parser = ResponseHeadParser(maximumBytes: 1024)
        _ = feed(&parser, ["HTTP/1.1 200 OK\r\n", "\r\n"])
        XCTAssertEqual(feed(&parser, ["X-Trailer: 1\r\n", "\r\n"]), [.needMore, .needMore])
        XCTAssertNil(parser.headerDictionary["X-Trailer"])
    }
}
