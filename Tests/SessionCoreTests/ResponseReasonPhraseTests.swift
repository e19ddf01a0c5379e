import Foundation
import Serialization
import XCTest
@testable import SessionCore

/// The status line's reason phrase reaches `HTTPResponseHead.reasonPhrase` as the server
/// wrote it (the `curlew` tool prints it), and never carries a control byte.
final class ResponseReasonPhraseTests: XCTestCase {
    private func head(_ statusLine: String) throws -> HTTPResponseHead {
        let parser = ResponseHeadParser(maximumBytes: 1024)
        var last = ResponseHeadParser.Event.needMore
        for line in [statusLine, "Content-Length: 0\r\n", "\r\n"] {
            last = Array(line.utf8).withUnsafeBytes { parser.consume($0) }
        }
        XCTAssertEqual(last, .headComplete, statusLine)
        return parser.makeHead(url: try XCTUnwrap(URL(string: "http://example.test/")))
    }

    func testReasonPhraseIsKeptAsSent() throws {
        XCTAssertEqual(try head("HTTP/1.1 200 OK\r\n").reasonPhrase, "OK")
        XCTAssertEqual(try head("HTTP/1.1 200 Ok\r\n").reasonPhrase, "Ok")
        XCTAssertEqual(try head("HTTP/1.1 404 Not  Found \r\n").reasonPhrase, "Not  Found ")
        XCTAssertEqual(try head("HTTP/1.1 418 I'M A TEAPOT\r\n").reasonPhrase, "I'M A TEAPOT")
        XCTAssertEqual(try head("HTTP/1.0 299 Très bien\r\n").reasonPhrase, "Très bien")
    }

    func testNoReasonPhraseIsNil() throws {
        XCTAssertNil(try head("HTTP/2 204\r\n").reasonPhrase)
        XCTAssertNil(try head("HTTP/1.1 200\r\n").reasonPhrase)
        XCTAssertEqual(try head("HTTP/1.1 200 \r\n").reasonPhrase, nil, "a lone space carries no phrase")
    }

    func testControlBytesBecomeSpaces() throws {
        XCTAssertEqual(try head("HTTP/1.1 200 O\u{1B}[2JK\r\n").reasonPhrase, "O [2JK")
    }

    func testInterimAndEarlierResponsesDoNotLeakTheirPhrase() throws {
        let parser = ResponseHeadParser(maximumBytes: 1024)
        for line in ["HTTP/1.1 100 Continue\r\n", "\r\n", "HTTP/2 201\r\n", "\r\n"] {
            _ = Array(line.utf8).withUnsafeBytes { parser.consume($0) }
        }
        XCTAssertNil(parser.makeHead(url: URL(fileURLWithPath: "/")).reasonPhrase)
    }

    func testHeadsMadeByCallersCarryTheirPhrase() throws {
        let url = try XCTUnwrap(URL(string: "http://example.test/"))
        XCTAssertEqual(HTTPResponseHead(url: url, statusCode: 200, reasonPhrase: "Fine", fields: []).reasonPhrase, "Fine")
        XCTAssertNil(HTTPResponseHead(url: url, statusCode: 200, fields: []).reasonPhrase)
    }
}
