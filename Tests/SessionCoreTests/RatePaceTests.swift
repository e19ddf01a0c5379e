import CurlewTestSupport
import XCTest
@testable import SessionCore

/// `RatePace` and the idle clock of a capped transfer: libcurl's waits for a rate cap are not
/// the server's silence, and silence after them still times out. Values only: the clock is
/// given its times (nanoseconds), nothing waits.
final class RatePaceTests: XCTestCase {
    private let second: UInt64 = 1_000_000_000

    /// A clock with a 1 s idle limit and a receive cap of `cap` bytes per second from 0.
    private func cappedClock(receive cap: Int64) -> TransferClock {
        var clock = TransferClock(timeouts: TransferTimeouts(idle: second, total: nil), now: 0)
        clock.setRateCaps(receive: cap, send: nil, at: 0)
        return clock
    }

    func testABurstAheadOfTheCapHoldsTheIdleClockUntilTheCapsWaitIsOver() {
        var clock = cappedClock(receive: 1_000)
        // 5,000 bytes at 0.1 s: libcurl waits until 5 s have passed since its stamp.
        clock.noteActivity(at: second / 10)
        clock.observeCounts(uploaded: 0, downloaded: 5_000, at: second / 10)
        XCTAssertEqual(clock.pacedUntil, 5 * second + second / 10)
        XCTAssertNil(clock.expiry(at: 3 * second), "the cap's wait is not silence")
        XCTAssertNil(clock.expiry(at: 6 * second))
        XCTAssertEqual(clock.nextDeadline, 6 * second + second / 10)
        // Nothing after the wait: that silence is the server's.
        XCTAssertNotNil(clock.expiry(at: 6 * second + second / 10))
    }

    func testAServerSlowerThanTheCapIsTimedFromItsLastByte() {
        var clock = cappedClock(receive: 1_000_000)
        // 1,000 bytes a second against a cap of 1 MB/s: libcurl never waits.
        for tick in 1...5 {
            let now = UInt64(tick) * second
            clock.noteActivity(at: now)
            clock.observeCounts(uploaded: 0, downloaded: Int64(tick) * 1_000, at: now)
        }
        // At most the last step's time at the cap (1 ms) beyond the last byte.
        XCTAssertLessThanOrEqual(clock.pacedUntil, 5 * second + second / 1_000)
        XCTAssertNotNil(clock.expiry(at: 6 * second + second / 1_000))
    }

    func testTheSendCapHoldsTheClockAsTheReceiveCapDoes() {
        var clock = TransferClock(timeouts: TransferTimeouts(idle: second, total: nil), now: 0)
        clock.setRateCaps(receive: nil, send: 10_000, at: 0)
        clock.noteActivity(at: 0)
        clock.observeCounts(uploaded: 65_536, downloaded: 0, at: 0)
        XCTAssertNil(clock.expiry(at: 7 * second), "64 KiB at 10 KB/s: a 6.5 s wait")
        XCTAssertNotNil(clock.expiry(at: 8 * second))
    }

    func testANewExchangeForgetsTheLastOnesCapsAndWaits() {
        var clock = cappedClock(receive: 1_000)
        clock.observeCounts(uploaded: 0, downloaded: 50_000, at: 0)
        XCTAssertEqual(clock.pacedUntil, 50 * second)
        clock.setRateCaps(receive: nil, send: nil, at: second)
        clock.noteActivity(at: second)
        XCTAssertFalse(clock.isRateCapped)
        XCTAssertEqual(clock.nextDeadline, 2 * second)
        // Uncapped, counts are not kept.
        clock.observeCounts(uploaded: 0, downloaded: 90_000, at: second)
        XCTAssertEqual(clock.pacedUntil, 0)
    }

    func testAnEnormousWaitNeverWrapsTheDeadline() {
        var clock = TransferClock(timeouts: TransferTimeouts(idle: second, total: 10 * second), now: 0)
        clock.setRateCaps(receive: 1, send: nil, at: 0)
        clock.observeCounts(uploaded: 0, downloaded: .max, at: 0)
        XCTAssertEqual(clock.pacedUntil, .max)
        XCTAssertEqual(clock.nextDeadline, 10 * second, "only the total clock is left")
        XCTAssertNil(clock.expiry(at: 9 * second))
        XCTAssertEqual(clock.expiry(at: 10 * second).map { "\($0)".hasPrefix("total") }, true)
    }

    func testACountThatStartsAgainStartsThePaceAgain() {
        var pace = RatePace(bytesPerSecond: 1_000, now: 0)
        pace.observe(10_000, at: 0)
        XCTAssertEqual(pace.heldUntil, 10 * second)
        pace.observe(500, at: 20 * second)  // libcurl counts a new transfer from zero
        XCTAssertEqual(pace.heldUntil, 20 * second + second / 2)
    }

    /// libcurl 7.88's own pacing, step by step (1 ms), against random bursts from the server:
    /// whenever libcurl waits for the cap, the clock's bound is at or past the end of that
    /// wait. The model is `Curl_pgrsLimitWaitTime` and `Curl_ratelimit` (a new stamp at most
    /// every 3 s, taken when the transfer starts waiting and when it goes on), with reads of
    /// up to a burst's size per pass.
    func testTheBoundIsNeverBeforeTheEndOfLibcurlsWait() {
        var generator = SplitMix64(seed: 0x5EED)
        var waits = 0
        for round in 0..<48 {
            let cap = Int64(1 + generator.next() % 200_000)
            let burst = Int64(1 + generator.next() % 2_000_000)
            // The server's mean gap between bursts: some rounds supply less than the cap on
            // average (libcurl's stamp moves on while the transfer is behind), some far more.
            let gap = 50 + generator.next() % 8_000
            var pace = RatePace(bytesPerSecond: cap, now: 0)
            var count: Int64 = 0
            var stampTime: Int64 = 0  // ms
            var stampCount: Int64 = 0
            var waitingUntil: Int64? = nil
            var available: Int64 = 0
            func limitWait(_ now: Int64) -> Int64 {
                let size = count - stampCount
                guard size > 0 else { return 0 }
                let minimum = 1_000 * size / cap
                let actual = now - stampTime
                return actual < minimum ? minimum - actual : 0
            }
            func ratelimit(_ now: Int64) {
                if now - stampTime >= 3_000 {
                    stampTime = now
                    stampCount = count
                }
            }
            for now in stride(from: Int64(0), to: 30_000, by: 1) {
                // The server: sometimes a burst, sometimes silence.
                if generator.next() % gap == 0 { available += Int64(generator.next() % UInt64(burst)) }
                // Nothing is observed while libcurl waits: the bound is checked as a wait begins
                // (or is extended), to the millisecond libcurl rounds to.
                func wait(until end: Int64) {
                    waitingUntil = end
                    waits += 1
                    let bound = pace.heldUntil
                    XCTAssertGreaterThanOrEqual(
                        bound + 1_000_000, UInt64(end) * 1_000_000,
                        "round \(round): cap \(cap), libcurl waits until \(end) ms, the bound ends at \(bound / 1_000_000) ms")
                }
                if let until = waitingUntil {
                    guard now >= until else { continue }
                    let more = limitWait(now)
                    if more == 0 {
                        waitingUntil = nil
                        ratelimit(now)
                    } else {
                        wait(until: now + more)
                    }
                    continue
                }
                let more = limitWait(now)
                if more > 0 {
                    ratelimit(now)
                    wait(until: now + more)
                    continue
                }
                let read = min(available, burst)
                guard read > 0 else { continue }
                available -= read
                count += read
                pace.observe(count, at: UInt64(now) * 1_000_000)
            }
        }
        XCTAssertGreaterThan(waits, 50, "the model made libcurl wait")
    }
}

