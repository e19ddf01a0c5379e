import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The end-of-exchange decision, alone: every branch the driver can take.
final class TransferEndTests: XCTestCase {
    private func hop(keepsBody: Bool = false) throws -> RedirectPolicy.Hop {
        RedirectPolicy.Hop(request: URLRequest(url: try XCTUnwrap(URL(string: "http://h/next"))), keepsBody: keepsBody)
    }

    func testAStaleConnectionIsRetriedBeforeAnythingElse() throws {
        var facts = TransferEnd.Facts()
        facts.error = .networkLost("x")
        facts.refusedStaleConnection = true
        facts.hasChallengeForHandler = true
        facts.head = .redirect(try hop())
        XCTAssertEqual(TransferEnd.decide(facts), .retryOnFreshConnection)
    }

    func testAChallengeGoesToTheHandler() {
        var facts = TransferEnd.Facts()
        facts.hasChallengeForHandler = true
        facts.head = .challenge
        XCTAssertEqual(TransferEnd.decide(facts), .askChallengeHandler)
    }

    func testAnErrorFinishesEvenARedirect() throws {
        var facts = TransferEnd.Facts()
        facts.error = .decompressionLimitExceeded(ratio: 100)
        facts.head = .redirect(try hop())
        XCTAssertEqual(TransferEnd.decide(facts), .finish(.decompressionLimitExceeded(ratio: 100)))
    }

    func testARedirectIsFollowedOrPutToTheHook() throws {
        var facts = TransferEnd.Facts()
        facts.head = .redirect(try hop())
        XCTAssertEqual(TransferEnd.decide(facts), .follow(try hop()))
        facts.hasRedirectHook = true
        XCTAssertEqual(TransferEnd.decide(facts), .askRedirectHook(try hop()))
    }

    func testTheRedirectLimitIsCountedInOnePlace() throws {
        var facts = TransferEnd.Facts()
        facts.head = .redirect(try hop())
        facts.maximumRedirects = 2
        facts.redirectCount = 1
        XCTAssertEqual(TransferEnd.decide(facts), .follow(try hop()))
        facts.redirectCount = 2
        XCTAssertEqual(TransferEnd.decide(facts), .finish(.tooManyRedirects(2)))
        facts.maximumRedirects = 0
        facts.redirectCount = 0
        XCTAssertEqual(TransferEnd.decide(facts), .finish(.tooManyRedirects(0)))
    }

    func testABodyThatCannotBeReplayedFailsA307ButNotA303() throws {
        var facts = TransferEnd.Facts()
        facts.canReplayBody = false
        facts.head = .redirect(try hop(keepsBody: true))
        guard case .finish(.bodyStreamFailed?) = TransferEnd.decide(facts) else {
            return XCTFail("\(TransferEnd.decide(facts))")
        }
        facts.head = .redirect(try hop(keepsBody: false))
        XCTAssertEqual(TransferEnd.decide(facts), .follow(try hop(keepsBody: false)))
    }

    func testAnythingElseFinishesWithTheResponse() {
        var facts = TransferEnd.Facts()
        XCTAssertEqual(TransferEnd.decide(facts), .finish(nil))
        facts.head = .deliver
        XCTAssertEqual(TransferEnd.decide(facts), .finish(nil))
        facts.head = .challenge  // held back, but the handler had no challenge for it
        XCTAssertEqual(TransferEnd.decide(facts), .finish(nil))
    }

    /// A delivered response whose hook has not answered waits for it; an error does not.
    func testAnExchangeThatEndsBeforeTheResponseHookAnswersWaits() {
        var facts = TransferEnd.Facts()
        facts.head = .deliver
        facts.awaitsResponseDecision = true
        XCTAssertEqual(TransferEnd.decide(facts), .waitForResponseDecision)
        facts.error = .timedOut("idle")
        XCTAssertEqual(TransferEnd.decide(facts), .finish(.timedOut("idle")))
    }

    func testTheHeadDispositionPrefersARedirectOverAChallenge() throws {
        XCTAssertEqual(TransferEnd.disposition(hop: try hop(), challengeable: true), .redirect(try hop()))
        XCTAssertEqual(TransferEnd.disposition(hop: nil, challengeable: true), .challenge)
        XCTAssertEqual(TransferEnd.disposition(hop: nil, challengeable: false), .deliver)
    }
}
