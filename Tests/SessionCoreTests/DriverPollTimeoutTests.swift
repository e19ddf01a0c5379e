import XCTest
@testable import SessionCore

/// How long the driver sleeps in `curl_multi_poll`: until its next deadline, rounded up to a
/// whole millisecond; never more than a second while it has transfers (libcurl 7.88 can sit on
/// input it has already read, with no socket readable and no timer set); for ever when nothing
/// is due and nothing runs.
final class DriverPollTimeoutTests: XCTestCase {
    private let millisecond: UInt64 = 1_000_000
    private let now: UInt64 = 5_000_000_000_000

    private func timeout(_ next: UInt64, transfers: Bool) -> Int32 {
        DriverLoop.pollTimeout(until: next, now: now, hasTransfers: transfers)
    }

    func testAnIdleDriverSleepsUntilTheNextCommand() {
        XCTAssertEqual(timeout(.max, transfers: false), Int32.max)
    }

    func testADriverWithTransfersWakesAtLeastOnceASecond() {
        XCTAssertEqual(timeout(.max, transfers: true), 1_000)
        XCTAssertEqual(timeout(now + 3_600_000 * millisecond, transfers: true), 1_000)
        XCTAssertEqual(timeout(now + 1_000 * millisecond + 1, transfers: true), 1_000)
        XCTAssertEqual(timeout(now + 999 * millisecond + 1, transfers: true), 1_000)
        XCTAssertEqual(timeout(now + 250 * millisecond, transfers: true), 250)
    }

    func testWithoutTransfersADeadlineIsWaitedForInFull() {
        XCTAssertEqual(timeout(now + 3_600_000 * millisecond, transfers: false), 3_600_000)
        // A deadline past what poll(2) takes in milliseconds waits the longest it can.
        XCTAssertEqual(timeout(.max - 1, transfers: false), Int32.max)
    }

    func testAWaitIsRoundedUpSoItNeverEndsBeforeItsDeadline() {
        XCTAssertEqual(timeout(now + 1, transfers: false), 1)
        XCTAssertEqual(timeout(now + 10 * millisecond, transfers: false), 10)
        XCTAssertEqual(timeout(now + 10 * millisecond + 1, transfers: false), 11)
    }

    func testADeadlineDueOrPastDoesNotWait() {
        XCTAssertEqual(timeout(now, transfers: false), 0)
        XCTAssertEqual(timeout(now - 1, transfers: true), 0)
        XCTAssertEqual(timeout(0, transfers: false), 0)
    }
}
