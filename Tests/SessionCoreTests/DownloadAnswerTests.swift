import XCTest
@testable import SessionCore

/// `DownloadAnswer.placement` alone: where an answer's body goes for what the file asked.
final class DownloadAnswerTests: XCTestCase {
    private typealias Asked = DownloadAnswer.Asked
    private typealias Answer = DownloadAnswer.Answer

    /// The rest of a whole file after 400 of 1,000 bytes, with `If-Range: "v1"`.
    private let rest = Asked(
        isFromResumeData: true, rangeStart: 400, origin: 0, rangeLast: nil, validator: "\"v1\"", sentEntityTag: "\"v1\"",
        expectedLength: 1_000)

    private func answer(_ status: Int, _ range: (Int64, Int64, Int64)? = nil, tag: String? = "\"v1\"", coded: Bool = false) -> Answer {
        Answer(
            statusCode: status, range: range.map { (first: $0.0, last: $0.1, length: $0.2) }, entityTag: tag,
            lastModified: nil, isContentEncoded: coded, hasBody: true)
    }

    private func describe(_ placement: DownloadAnswer.Placement) -> String {
        switch placement {
        case .append(let start, let end): return "append \(start) to \(end.map(String.init) ?? "-")"
        case .fromStart(let range, let end): return "from 0 at \(range.origin) to \(end.map(String.init) ?? "-")"
        case .restartWithoutRange: return "restart"
        case .reject(let status): return "reject \(status)"
        }
    }

    func testTheRestIsAppendedAndAnythingElseRestartsOrFails() {
        let cases: [(Answer, String)] = [
            (answer(206, (400, 999, 1_000)), "append 400 to 1000"),
            (answer(206, (400, 999, 1_000), tag: "\"v2\""), "restart"),
            (answer(206, (0, 999, 1_000)), "restart"),
            (answer(206, (400, 999, 1_000), coded: true), "restart"),
            (answer(416), "restart"),
            (answer(200), "from 0 at 0 to -"),
            (answer(200, coded: true), "restart"),
            (answer(503), "reject 503"),
        ]
        for (given, expected) in cases {
            XCTAssertEqual(describe(DownloadAnswer.placement(of: given, asked: rest)), expected, "\(given.statusCode)")
        }
    }

    func testAByteRangeAskedFromItsStartTakesOnlyItsOwnUncodedBytes() {
        let range = Asked(
            isFromResumeData: true, rangeStart: 0, origin: 2_000, rangeLast: 2_999, validator: nil, sentEntityTag: nil,
            expectedLength: nil)
        XCTAssertEqual(describe(DownloadAnswer.placement(of: answer(206, (2_000, 2_999, 6_000)), asked: range)), "from 0 at 2000 to 1000")
        XCTAssertEqual(describe(DownloadAnswer.placement(of: answer(206, (0, 99, 6_000)), asked: range)), "reject 206")
        XCTAssertEqual(describe(DownloadAnswer.placement(of: answer(206, (2_000, 2_999, 6_000), coded: true), asked: range)), "reject 206")
        XCTAssertEqual(describe(DownloadAnswer.placement(of: answer(200, coded: true), asked: range)), "reject 200")
    }

    /// `If-Range` with a date (no entity tag): a 206 dated the same second in another of the
    /// three HTTP date forms is the rest of the same representation (it was given up, and the
    /// whole body downloaded again); one dated otherwise, or unreadably, is not.
    func testA206DatedTheSameSecondInAnotherFormIsTheRest() {
        let dated = Asked(
            isFromResumeData: true, rangeStart: 400, origin: 0, rangeLast: nil, validator: "Sun, 06 Nov 1994 08:49:37 GMT",
            sentEntityTag: nil, expectedLength: 1_000)
        for (lastModified, expected) in [
            ("Sun, 06 Nov 1994 08:49:37 GMT", "append 400 to 1000"),
            ("Sunday, 06-Nov-94 08:49:37 GMT", "append 400 to 1000"),
            ("Sun Nov  6 08:49:37 1994", "append 400 to 1000"),
            ("Sun, 06 Nov 1994 08:49:38 GMT", "restart"),
            ("yesterday", "restart"),
        ] {
            var given = answer(206, (400, 999, 1_000), tag: nil)
            given.lastModified = lastModified
            XCTAssertEqual(describe(DownloadAnswer.placement(of: given, asked: dated)), expected, lastModified)
        }
    }

    func testANewDownloadTakesAnyAnswer() {
        let fresh = Asked(
            isFromResumeData: false, rangeStart: 0, origin: 0, rangeLast: nil, validator: nil, sentEntityTag: nil, expectedLength: nil)
        XCTAssertEqual(describe(DownloadAnswer.placement(of: answer(404), asked: fresh)), "from 0 at 0 to -")
        XCTAssertEqual(describe(DownloadAnswer.placement(of: answer(206, (10, 19, 100)), asked: fresh)), "from 0 at 10 to 10")
    }
}
