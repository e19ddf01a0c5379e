import Foundation
import XCTest
@testable import SessionCore

/// The WHATWG EventSource parsing rules, with the specification's own examples
/// (html.spec.whatwg.org, "Server-sent events", §9.2.5 and §9.2.6), fed through the line
/// splitter in every chunking.
final class ServerSentEventParserTests: XCTestCase {
    /// An empty chunk between a CR and its LF (no caller sends one today; the splitter is a
    /// value of its own) is no line end: the CRLF stays one.
    func testAnEmptyChunkBetweenCRAndLFSplitsNothing() throws {
        var splitter = LineSplitter(maximumLineLength: 1024)
        XCTAssertEqual(try splitter.push(Data("a\r".utf8)), ["a"])
        XCTAssertEqual(try splitter.push(Data()), [])
        XCTAssertEqual(try splitter.push(Data("\nb\n".utf8)), ["b"])
    }

    /// Parses `stream` cut into pieces of `size` bytes (0: whole).
    private func events(_ stream: String, pieceSize size: Int = 0) throws -> [ServerSentEvent] {
        var splitter = LineSplitter(maximumLineLength: 1 << 20)
        var parser = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        let bytes = Data(stream.utf8)
        let step = size > 0 ? size : max(1, bytes.count)
        var offset = 0
        while offset < bytes.count {
            let piece = bytes[offset..<min(bytes.count, offset + step)]
            for line in try splitter.push(Data(piece)) {
                if let event = try parser.consume(line: line) { events.append(event) }
            }
            offset += step
        }
        // The end of the stream: a last line without a blank line after it dispatches nothing.
        if let last = splitter.finish(), let event = try parser.consume(line: last) { events.append(event) }
        return events
    }

    private func assertEveryChunking(_ stream: String, _ expected: [ServerSentEvent], line: UInt = #line) throws {
        for size in [0, 1, 2, 3, 7] {
            XCTAssertEqual(try events(stream, pieceSize: size), expected, "piece size \(size)", line: line)
        }
    }

    func testMultiLineDataIsJoinedWithLF() throws {
        try assertEveryChunking("data: YHOO\ndata: +2\ndata: 10\n\n", [ServerSentEvent(data: "YHOO\n+2\n10")])
    }

    func testCommentsIDsAndTheIDReset() throws {
        let stream = ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n"
        try assertEveryChunking(stream, [
            ServerSentEvent(id: "1", data: "first event"),
            ServerSentEvent(id: nil, data: "second event"),
            ServerSentEvent(id: nil, data: " third event"),
        ])
    }

    func testEmptyDataLinesAndAnUnterminatedLastEvent() throws {
        // "data" alone is an empty data line; the final "data:" has no blank line: discarded.
        try assertEveryChunking("data\n\ndata\ndata\n\ndata:", [ServerSentEvent(data: ""), ServerSentEvent(data: "\n")])
    }

    func testOneLeadingSpaceIsRemovedFromValues() throws {
        try assertEveryChunking("data:test\n\ndata: test\n\n", [ServerSentEvent(data: "test"), ServerSentEvent(data: "test")])
    }

    /// The space removed is one U+0020: a combining mark after it (one Character with the
    /// space) stays in the value, in every field.
    func testTheLeadingSpaceRemovedLeavesACombiningMarkAfterIt() throws {
        try assertEveryChunking("event: \u{301}e\nid: \u{301}i\ndata: \u{301}x\n\n", [
            ServerSentEvent(id: "\u{301}i", event: "\u{301}e", data: "\u{301}x"),
        ])
    }

    func testCRLFAndLoneCRAndLFAllEndLines() throws {
        try assertEveryChunking("data: a\r\ndata: b\rdata: c\n\r\nevent: x\rdata: d\r\r", [
            ServerSentEvent(data: "a\nb\nc"), ServerSentEvent(event: "x", data: "d"),
        ])
    }

    func testALeadingBOMIsDroppedOnceAndOnlyAtTheStart() throws {
        try assertEveryChunking("\u{FEFF}data: one\n\n\u{FEFF}data: two\n\n", [ServerSentEvent(data: "one")])
    }

    func testTheIDCarriesForwardToLaterEvents() throws {
        try assertEveryChunking("id: 7\ndata: a\n\ndata: b\n\nid: 8\nevent: tick\ndata: c\n\n", [
            ServerSentEvent(id: "7", data: "a"), ServerSentEvent(id: "7", data: "b"),
            ServerSentEvent(id: "8", event: "tick", data: "c"),
        ])
    }

    func testAnIDWithNULIsIgnored() throws {
        try assertEveryChunking("id: 1\ndata: a\n\nid: 2\u{0}x\ndata: b\n\n", [
            ServerSentEvent(id: "1", data: "a"), ServerSentEvent(id: "1", data: "b"),
        ])
    }

    func testRetryNeedsDigitsOnlyAndABlockOfRetryAloneDispatchesNothing() throws {
        var splitter = LineSplitter(maximumLineLength: 1024)
        var parser = ServerSentEventParser()
        var dispatched: [ServerSentEvent] = []
        for line in try splitter.push(Data("retry: 2500\n\nretry: 12a\nretry: -5\n\nretry: 40\ndata: x\n\n".utf8)) {
            if let event = try parser.consume(line: line) { dispatched.append(event) }
        }
        XCTAssertEqual(dispatched, [ServerSentEvent(data: "x", retry: 40)])
        XCTAssertEqual(parser.reconnectionTime, 40)
    }

    func testUnknownFieldsAndFieldsWithoutColonAreIgnored() throws {
        try assertEveryChunking("foo: bar\ndata: kept\nDATA: not data\nevent\n\n", [ServerSentEvent(data: "kept")])
    }

    func testADroppedConnectionDiscardsTheHalfEventButKeepsTheID() throws {
        var parser = ServerSentEventParser()
        for line in ["id: 42", "data: whole", ""] { _ = try parser.consume(line: line) }
        // The half event's own id: is not in force until its blank line, which never comes.
        for line in ["id: 43", "event: half", "data: half"] { XCTAssertNil(try parser.consume(line: line)) }
        parser.discardPendingEvent()
        XCTAssertEqual(parser.lastEventID, "42")
        XCTAssertEqual(try parser.consume(line: "data: next"), nil)
        XCTAssertEqual(try parser.consume(line: ""), ServerSentEvent(id: "42", data: "next"))
    }

    func testAnIDTakesEffectAtTheBlankLineEvenWithoutData() throws {
        var parser = ServerSentEventParser()
        XCTAssertNil(try parser.consume(line: "id: 5"))
        XCTAssertEqual(parser.lastEventID, "", "not before its block ends")
        XCTAssertNil(try parser.consume(line: ""))
        XCTAssertEqual(parser.lastEventID, "5", "a block with only id: sets it, dispatching nothing")
    }

    func testAnEventOverTheSizeLimitThrows() throws {
        var parser = ServerSentEventParser(maximumEventSize: 100)
        XCTAssertThrowsError(try {
            for _ in 0..<20 { _ = try parser.consume(line: "data: 0123456789") }
        }()) { error in
            XCTAssertEqual(error as? ResponseStreamError, .eventTooLarge(limit: 100))
        }
    }

    func testALineOverTheLimitThrows() {
        var splitter = LineSplitter(maximumLineLength: 8)
        XCTAssertEqual(try splitter.push(Data("12345678\n".utf8)), ["12345678"])
        XCTAssertThrowsError(try splitter.push(Data("1234".utf8) + Data("56789".utf8))) { error in
            XCTAssertEqual(error as? ResponseStreamError, .lineTooLong(limit: 8))
        }
    }
}
