import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The transfer's state machine alone, without libcurl: the end-of-exchange rules, every
/// event in every phase, and the idle clock and slot that follow from the phase.
final class TransferStateMachineTests: XCTestCase {
    typealias Machine = TransferStateMachine

    private func hop(keepsBody: Bool = false) throws -> RedirectPolicy.Hop {
        RedirectPolicy.Hop(request: URLRequest(url: try XCTUnwrap(URL(string: "http://h/next"))), keepsBody: keepsBody)
    }

    /// A machine in an exchange whose head arrived with `disposition`.
    private func exchanging(
        _ disposition: Machine.HeadDisposition?, maximumRedirects: Int = 16, redirects: Int = 0
    ) -> Machine {
        var machine = Machine(timeouts: TransferTimeouts(idle: 100, total: 10_000), maximumRedirects: maximumRedirects, now: 0)
        for _ in 0..<redirects { machine.redirectFollowed(now: 0) }
        machine.attached(now: 0)
        _ = machine.connecting(now: 0)
        if let disposition { machine.headReceived(disposition, now: 0) }
        return machine
    }

    private func ended(_ machine: Machine, _ facts: Machine.EndFacts) -> Machine.EndAction? {
        var machine = machine
        return machine.exchangeEnded(facts, now: 1)
    }

    // MARK: - Probes of silent transfers

    /// Only a transfer whose idle clock runs is probed (attached, with a connection, nothing
    /// holding it), once per due time; waiting for a slot, a connection, the caller or a
    /// decision is not silence.
    func testOnlyARunningTransferIsProbedAndOncePerDueTime() {
        var machine = Machine(timeouts: TransferTimeouts(idle: 1_000, total: nil), maximumRedirects: 16, now: 0, firstProbeDelay: 10)
        XCTAssertFalse(machine.probeIsDue(now: 500), "not attached")
        machine.attached(now: 0)
        XCTAssertFalse(machine.probeIsDue(now: 500), "no connection yet")
        _ = machine.connecting(now: 500)
        XCTAssertFalse(machine.probeIsDue(now: 509))
        XCTAssertTrue(machine.probeIsDue(now: 510))
        XCTAssertFalse(machine.probeIsDue(now: 510), "counted: the next one waits longer")
        XCTAssertFalse(machine.probeIsDue(now: 529))
        XCTAssertTrue(machine.probeIsDue(now: 530))
        machine.noteActivity(now: 540)
        XCTAssertTrue(machine.probeIsDue(now: 550))
        XCTAssertTrue(machine.suspend(now: 550))
        XCTAssertFalse(machine.probeIsDue(now: 5_000), "suspended by the caller")
        XCTAssertEqual(machine.resume(now: 5_000), .continueTransfer)
        XCTAssertFalse(machine.probeIsDue(now: 5_009))
        XCTAssertTrue(machine.probeIsDue(now: 5_010))
        machine.bodyProducerFellBehind(now: 5_010)
        XCTAssertTrue(machine.probeIsDue(now: 5_030), "waiting for the body's producer: the receive side is still probed")
        XCTAssertTrue(machine.bodyProducerCaughtUp(now: 5_030))
        machine.consumerFellBehind(now: 5_030)
        XCTAssertFalse(machine.probeIsDue(now: 9_000), "held by backpressure")

        var off = exchanging(.deliver)
        XCTAssertFalse(off.probeIsDue(now: 5_000), "no probe delay: this libcurl needs none")
    }

    /// The probe meets the response hook and a retry: the hook's wait is a hold (no probe
    /// however long it takes), and an attempt sent again starts the probes' series anew from
    /// its connection, whatever the timed-out attempt had reached.
    func testTheResponseHookHoldsProbesAndARetryStartsTheirSeriesAgain() {
        var machine = Machine(timeouts: TransferTimeouts(idle: 1_000, total: nil), maximumRedirects: 16, now: 0, firstProbeDelay: 10)
        machine.attached(now: 0)
        _ = machine.connecting(now: 0)
        machine.headReceived(.deliver, now: 0)
        machine.responseHookAsked(now: 5)
        XCTAssertFalse(machine.probeIsDue(now: 900), "the hook decides: not the server's silence")
        XCTAssertEqual(machine.responseAnswered(cancel: false, now: 900), .continueTransfer)
        XCTAssertTrue(machine.probeIsDue(now: 910), "the series starts when the hook answered")
        XCTAssertTrue(machine.probeIsDue(now: 930))
        XCTAssertTrue(machine.probeIsDue(now: 970))

        machine.attemptTimedOut(now: 1_970)
        XCTAssertFalse(machine.probeIsDue(now: 5_000), "between attempts")
        machine.restart(now: 5_000)
        machine.attached(now: 5_000)
        _ = machine.connecting(now: 5_000)
        XCTAssertFalse(machine.probeIsDue(now: 5_009))
        XCTAssertTrue(machine.probeIsDue(now: 5_010), "the first wait again, not the eighth")
    }

    // MARK: - The end-of-exchange rules (absorbed from TransferEnd)

    func testAStaleConnectionIsRetriedBeforeAnythingElse() throws {
        var facts = Machine.EndFacts()
        facts.error = .networkLost("x")
        facts.refusedStaleConnection = true
        facts.hasChallengeForHandler = true
        XCTAssertEqual(ended(exchanging(.redirect(try hop())), facts), .retryOnFreshConnection)
    }

    /// A 417 that refused the caller's expectation: sent again without it, unless the body
    /// cannot go again, when the 417 is the answer; before a challenge or a redirect.
    func testARefusedExpectationIsSentAgainWithoutIt() throws {
        var facts = Machine.EndFacts()
        facts.expectationRefused = true
        facts.hasChallengeForHandler = true
        XCTAssertEqual(ended(exchanging(.redirect(try hop())), facts), .retryWithoutExpectation)
        var machine = exchanging(.deliver)
        XCTAssertEqual(machine.exchangeEnded(facts, now: 1), .retryWithoutExpectation)
        XCTAssertEqual(machine.phase, .ready)
        facts.canReplayBody = false
        XCTAssertEqual(ended(exchanging(.deliver), facts), .finish(nil))
    }

    func testAChallengeGoesToTheHandler() {
        var facts = Machine.EndFacts()
        facts.hasChallengeForHandler = true
        var machine = exchanging(.challenge)
        XCTAssertEqual(machine.exchangeEnded(facts, now: 1), .askChallengeHandler)
        XCTAssertEqual(machine.phase, .awaitingDecision(.challenge))
    }

    func testAnErrorFinishesEvenARedirect() throws {
        var facts = Machine.EndFacts()
        facts.error = .decompressionLimitExceeded(ratio: 100)
        XCTAssertEqual(ended(exchanging(.redirect(try hop())), facts), .finish(.decompressionLimitExceeded(ratio: 100)))
    }

    func testARedirectIsFollowedOrPutToTheHook() throws {
        var facts = Machine.EndFacts()
        XCTAssertEqual(ended(exchanging(.redirect(try hop())), facts), .follow(try hop()))
        facts.hasRedirectHook = true
        var machine = exchanging(.redirect(try hop()))
        XCTAssertEqual(machine.exchangeEnded(facts, now: 1), .askRedirectHook(try hop()))
        XCTAssertEqual(machine.phase, .awaitingDecision(.redirect))
    }

    func testTheRedirectLimitIsCountedInOnePlace() throws {
        let facts = Machine.EndFacts()
        XCTAssertEqual(ended(exchanging(.redirect(try hop()), maximumRedirects: 2, redirects: 1), facts), .follow(try hop()))
        XCTAssertEqual(
            ended(exchanging(.redirect(try hop()), maximumRedirects: 2, redirects: 2), facts), .finish(.tooManyRedirects(2)))
        XCTAssertEqual(ended(exchanging(.redirect(try hop()), maximumRedirects: 0), facts), .finish(.tooManyRedirects(0)))
        var machine = exchanging(.redirect(try hop()))
        machine.redirectFollowed(now: 1)
        XCTAssertEqual(machine.redirectCount, 0, "not while the exchange is in curl")
        _ = machine.exchangeEnded(Machine.EndFacts(), now: 1)
        machine.redirectFollowed(now: 2)
        machine.attached(now: 3)
        _ = machine.exchangeEnded(Machine.EndFacts(), now: 4)
        machine.redirectFollowed(now: 5)
        XCTAssertEqual(machine.redirectCount, 2, "the machine counts the hops it followed")
    }

    func testABodyThatCannotBeReplayedFailsA307ButNotA303() throws {
        var facts = Machine.EndFacts()
        facts.canReplayBody = false
        guard case .finish(.bodyStreamFailed?)? = ended(exchanging(.redirect(try hop(keepsBody: true))), facts) else {
            return XCTFail("a 307 with a body that cannot be replayed must fail")
        }
        XCTAssertEqual(ended(exchanging(.redirect(try hop(keepsBody: false))), facts), .follow(try hop(keepsBody: false)))
    }

    func testAnythingElseFinishesWithTheResponse() {
        let facts = Machine.EndFacts()
        XCTAssertEqual(ended(exchanging(nil), facts), .finish(nil))
        XCTAssertEqual(ended(exchanging(.deliver), facts), .finish(nil))
        XCTAssertEqual(ended(exchanging(.challenge), facts), .finish(nil), "held back, but the handler had no challenge for it")
    }

    func testADownloadWhoseRangeWasRefusedStartsOverUnlessItFailed() {
        var facts = Machine.EndFacts()
        facts.needsFullDownload = true
        XCTAssertEqual(ended(exchanging(.deliver), facts), .restartDownloadFromZero)
        facts.error = .cancelled
        XCTAssertEqual(ended(exchanging(.deliver), facts), .finish(.cancelled))
    }

    /// A delivered response whose hook has not answered waits for it (the facts kept in the
    /// phase); an error does not. The answer carries out the kept facts.
    func testAnExchangeThatEndsBeforeTheResponseHookAnswersWaitsForIt() throws {
        var machine = exchanging(.deliver)
        machine.responseHookAsked(now: 0)
        var facts = Machine.EndFacts()
        facts.hasRedirectHook = true
        XCTAssertEqual(machine.exchangeEnded(facts, now: 1), .waitForResponseDecision)
        XCTAssertEqual(machine.phase, .awaitingDecision(.response))
        XCTAssertEqual(machine.pendingEndFacts, facts)
        XCTAssertEqual(machine.responseAnswered(cancel: false, now: 2), .endExchange(.finish(nil), facts))
        XCTAssertEqual(machine.phase, .ready)
        XCTAssertEqual(machine.responseAnswered(cancel: false, now: 3), .ignore, "answered once")

        var failing = exchanging(.deliver)
        failing.responseHookAsked(now: 0)
        facts.error = .timedOut("idle")
        XCTAssertEqual(failing.exchangeEnded(facts, now: 1), .finish(.timedOut("idle")))
    }

    /// The hook is asked only about a delivered response: a redirect's head is never its.
    func testTheResponseHookIsNeverAskedAboutAHeldBackResponse() throws {
        var machine = exchanging(.redirect(try hop()))
        machine.responseHookAsked(now: 0)
        XCTAssertFalse(machine.awaitsResponseDecision)
        XCTAssertEqual(machine.bodyArrived(now: 1), .take)
    }

    func testASecondResponseWhileTheHookDecidesIsAnError() {
        var machine = exchanging(.deliver)
        XCTAssertTrue(machine.nextResponseBegins(), "an authentication pass before the hook is asked")
        XCTAssertNil(machine.headDisposition)
        machine.headReceived(.deliver, now: 0)
        machine.responseHookAsked(now: 0)
        XCTAssertFalse(machine.nextResponseBegins())
    }

    func testARouteThatReturnsSendsAgainWithoutCountingARetry() {
        var machine = Machine(timeouts: TransferTimeouts(idle: 100, total: 10_000), maximumRedirects: 16, now: 0)
        XCTAssertTrue(machine.connectivityAwaited(error: .cannotConnect("unreachable"), now: 1))
        XCTAssertFalse(machine.connectivityAwaited(error: .cannotConnect("unreachable"), now: 1), "awaited once")
        XCTAssertTrue(machine.holds.contains(.decision), "no idle clock while waiting for a route")
        XCTAssertEqual(machine.connectivityDecided(returned: true, now: 2), .retryNow(error: .cannotConnect("unreachable")))
        XCTAssertEqual(machine.retryCount, 0, "a route coming back is not the retrier's retry")
        XCTAssertEqual(machine.phase, .ready)
        XCTAssertEqual(machine.connectivityDecided(returned: true, now: 3), .ignore, "nothing awaited any more")
    }

    func testTheRetriersWaitForARouteEndsInAnotherAttemptEitherWay() {
        for returned in [true, false] {
            var machine = Machine(timeouts: TransferTimeouts(idle: 100, total: 10_000), maximumRedirects: 16, now: 0)
            XCTAssertTrue(machine.retrierAsked(error: .cannotConnect("unreachable"), now: 1))
            XCTAssertEqual(machine.retryDecided(.retryWhenConnected, now: 2), .awaitRoute(error: .cannotConnect("unreachable")))
            XCTAssertEqual(machine.phase, .awaitingDecision(.connectivity))
            XCTAssertEqual(machine.retryCount, 1, "the retrier's limit bounds how often it waits")
            XCTAssertEqual(
                machine.connectivityDecided(returned: returned, now: 3), .retryNow(error: .cannotConnect("unreachable")),
                "returned: \(returned)")
            XCTAssertEqual(machine.phase, .ready)
        }
    }

    func testARouteThatWasThereLetsTheErrorStand() {
        var machine = Machine(timeouts: TransferTimeouts(idle: 100, total: 10_000), maximumRedirects: 16, now: 0)
        XCTAssertTrue(machine.connectivityAwaited(error: .dnsFailure("no such host"), now: 1))
        XCTAssertEqual(machine.connectivityDecided(returned: false, now: 2), .finish(.dnsFailure("no such host")))
        XCTAssertEqual(machine.phase, .ready, "between exchanges: the retrier can be asked about the error")
        XCTAssertTrue(machine.retrierAsked(error: .dnsFailure("no such host"), now: 3))
    }

    // MARK: - Every event in every phase

    /// A named way to reach each phase (and the variants of `.attached` that matter).
    private func everyPhase() throws -> [(String, Machine)] {
        var ready = Machine(timeouts: TransferTimeouts(idle: 100, total: 10_000), maximumRedirects: 16, now: 0)
        var waiting = ready
        XCTAssertTrue(waiting.queuedForSlot(now: 0))
        var connecting = ready
        XCTAssertTrue(connecting.attached(now: 0))
        var connected = connecting
        XCTAssertNotNil(connected.connecting(now: 0))
        var delivering = connected
        delivering.headReceived(.deliver, now: 0)
        var hookPending = delivering
        hookPending.responseHookAsked(now: 0)
        var backpressured = delivering
        backpressured.consumerFellBehind(now: 0)
        var suspended = delivering
        XCTAssertTrue(suspended.suspend(now: 0))
        var producerBehind = connected
        producerBehind.bodyProducerFellBehind(now: 0)
        var challenge = exchanging(.challenge)
        var facts = Machine.EndFacts()
        facts.hasChallengeForHandler = true
        _ = challenge.exchangeEnded(facts, now: 0)
        var redirect = exchanging(.redirect(try hop()))
        facts = Machine.EndFacts()
        facts.hasRedirectHook = true
        _ = redirect.exchangeEnded(facts, now: 0)
        var response = hookPending
        _ = response.exchangeEnded(Machine.EndFacts(), now: 0)
        var retrier = ready
        retrier.retrierAsked(error: .timedOut("idle"), now: 0)
        var awaitingRoute = ready
        XCTAssertTrue(awaitingRoute.connectivityAwaited(error: .cannotConnect("unreachable"), now: 0))
        var backingOff = retrier
        _ = backingOff.retryDecided(.retryAfter(1e-6), now: 0)  // due within the total of 10,000 ns
        var awaitingResume = ready
        XCTAssertTrue(awaitingResume.holdsForResume(taskIsSuspended: true, now: 0))
        var finished = delivering
        finished.finish(now: 0)
        ready = Machine(timeouts: TransferTimeouts(idle: 100, total: 10_000), maximumRedirects: 16, now: 0)
        return [
            ("ready", ready), ("waitingForSlot", waiting), ("attached, connecting", connecting),
            ("attached, connected", connected), ("attached, delivering", delivering),
            ("attached, response hook pending", hookPending), ("attached, backpressured", backpressured),
            ("attached, suspended", suspended), ("attached, waiting for its body producer", producerBehind),
            ("awaiting the challenge handler", challenge),
            ("awaiting the redirection hook", redirect), ("awaiting the response hook", response),
            ("awaiting the retrier", retrier), ("awaiting a retry's back-off", backingOff),
            ("awaiting a route", awaitingRoute), ("awaiting resume", awaitingResume), ("finished", finished),
        ]
    }

    /// Every event the driver reports, by name; each returns a short description of its
    /// answer so that the table below can compare it.
    private func everyEvent() -> [(String, (inout Machine) -> String)] {
        [
            ("queuedForSlot", { "\($0.queuedForSlot(now: 5))" }),
            ("slotGranted", { "\($0.slotGranted(now: 5))" }),
            ("attached", { "\($0.attached(now: 5))" }),
            ("connecting", { "\($0.connecting(now: 5) != nil)" }),
            ("bodyArrived", { "\($0.bodyArrived(now: 5))" }),
            ("consumerFellBehind", { $0.consumerFellBehind(now: 5); return "" }),
            ("consumerCaughtUp", { "\($0.consumerCaughtUp(now: 5))" }),
            ("bodyProducerFellBehind", { $0.bodyProducerFellBehind(now: 5); return "" }),
            ("bodyProducerCaughtUp", { "\($0.bodyProducerCaughtUp(now: 5))" }),
            ("suspend", { "\($0.suspend(now: 5))" }),
            ("resume", { "\($0.resume(now: 5))" }),
            ("holdsForResume", { "\($0.holdsForResume(taskIsSuspended: true, now: 5))" }),
            ("exchangeEnded", { $0.exchangeEnded(Machine.EndFacts(), now: 5).map { "\($0)" } ?? "nil" }),
            ("responseAnswered", { "\($0.responseAnswered(cancel: false, now: 5))" }),
            ("challengeAnswered", { "\($0.challengeAnswered(now: 5))" }),
            ("redirectAnswered", { "\($0.redirectAnswered(now: 5))" }),
            ("retryDecided", { "\($0.retryDecided(.retry, now: 5))" }),
            ("retryDue", { "\(String(describing: $0.retryDue(now: 5)))" }),
            ("attemptTimedOut", { $0.attemptTimedOut(now: 5); return "" }),
            ("retrierAsked", { "\($0.retrierAsked(error: nil, now: 5))" }),
            ("connectivityAwaited", { "\($0.connectivityAwaited(error: .cannotConnect("x"), now: 5))" }),
            ("connectivityReturned", { "\($0.connectivityDecided(returned: true, now: 5))" }),
            ("restart", { $0.restart(now: 5); return "" }),
            ("redirectFollowed", { $0.redirectFollowed(now: 5); return "\($0.redirectCount)" }),
            ("headReceived", { $0.headReceived(.deliver, now: 0); return "" }),
            ("responseHookAsked", { $0.responseHookAsked(now: 5); return "" }),
            ("nextResponseBegins", { "\($0.nextResponseBegins())" }),
            ("finish", { $0.finish(now: 5); return "" }),
        ]
    }

    /// The phase each event moves each phase to (by the phase's name); absent: unchanged.
    private let expectedPhase: [String: [String: String]] = [
        "queuedForSlot": ["ready": "waitingForSlot"],
        "slotGranted": ["waitingForSlot": "ready"],
        "attached": ["ready": "attached"],
        "holdsForResume": ["ready": "awaitingResume"],
        "resume": ["awaiting resume": "ready"],
        "exchangeEnded": [
            "attached, connecting": "ready", "attached, connected": "ready", "attached, delivering": "ready",
            "attached, response hook pending": "awaitingDecision(response)", "attached, backpressured": "ready",
            "attached, suspended": "ready", "attached, waiting for its body producer": "ready",
        ],
        "responseAnswered": ["awaiting the response hook": "ready"],
        "challengeAnswered": ["awaiting the challenge handler": "ready"],
        "redirectAnswered": ["awaiting the redirection hook": "ready"],
        "retryDecided": ["awaiting the retrier": "ready"],
        "retrierAsked": ["ready": "awaitingDecision(retrier)"],
        "connectivityAwaited": ["ready": "awaitingDecision(connectivity)"],
        "connectivityReturned": ["awaiting a route": "ready"],
        "restart": [
            "awaiting the challenge handler": "ready", "awaiting the redirection hook": "ready",
            "awaiting the response hook": "ready", "awaiting the retrier": "ready", "awaiting a retry's back-off": "ready",
            "awaiting a route": "ready",
        ],
        "redirectFollowed": [
            "awaiting the challenge handler": "ready", "awaiting the redirection hook": "ready",
            "awaiting the response hook": "ready", "awaiting the retrier": "ready", "awaiting a retry's back-off": "ready",
            "awaiting a route": "ready",
        ],
        "attemptTimedOut": [
            "attached, connecting": "ready", "attached, connected": "ready", "attached, delivering": "ready",
            "attached, response hook pending": "ready", "attached, backpressured": "ready", "attached, suspended": "ready",
            "attached, waiting for its body producer": "ready",
        ],
    ]

    private func name(of phase: Machine.Phase) -> String {
        switch phase {
        case .ready: return "ready"
        case .waitingForSlot: return "waitingForSlot"
        case .attached: return "attached"
        case .awaitingDecision(let decision): return "awaitingDecision(\(decision))"
        case .awaitingRetry: return "awaitingRetry"
        case .awaitingResume: return "awaitingResume"
        case .finished: return "finished"
        }
    }

    /// Whether the idle clock may run in this state, written out from the rule rather than
    /// from `holds`: attached, connected, not suspended, not held by the consumer, not
    /// waiting for the response hook about a delivered response, not waiting for the request
    /// body's producer before the server answered.
    private func idleClockShouldRun(_ machine: Machine) -> Bool {
        machine.phase == .attached && machine.hasConnection && !machine.isSuspended && !machine.isBackpressured
            && !(machine.awaitsResponseDecision && machine.headDisposition == .deliver)
            && !(machine.awaitsBodyProducer && machine.headDisposition == nil)
    }

    func testEveryEventInEveryPhase() throws {
        let phases = try everyPhase()
        XCTAssertEqual(phases.count, 17)
        for (eventName, event) in everyEvent() {
            for (phaseName, start) in phases {
                var machine = start
                let answer = event(&machine)
                let context = "\(eventName) in \(phaseName) answered \(answer)"
                // Where the phase goes.
                let expected: String
                if eventName == "finish" {
                    expected = "finished"
                } else if let target = expectedPhase[eventName]?[phaseName] {
                    expected = target
                } else {
                    expected = name(of: start.phase)
                }
                XCTAssertEqual(name(of: machine.phase), expected, context)
                // The idle clock follows from the state, whatever the event.
                XCTAssertEqual(machine.holds.isEmpty, idleClockShouldRun(machine), context)
                XCTAssertEqual(machine.clock.holds, machine.holds, context)
                // Finished is final: no event moves a finished transfer, and it never times out.
                if start.phase == .finished {
                    XCTAssertEqual(machine.phase, .finished, context)
                    XCTAssertNil(machine.expiry(at: .max), "a finished transfer never times out: \(context)")
                }
                // Curl is asked to continue only a transfer that is in it and not suspended.
                if answer == "true", ["consumerCaughtUp", "bodyProducerCaughtUp"].contains(eventName) {
                    XCTAssertEqual(machine.phase, .attached, context)
                }
                if answer == "continueTransfer" { XCTAssertTrue(machine.maySend, context) }
                // Only a transfer that waited for the resume is attached by it.
                if eventName == "resume" {
                    XCTAssertEqual(answer == "attach", start.phase == .awaitingResume, context)
                }
            }
        }
    }

    // MARK: - The clock follows the phase

    /// A transfer suspended while it waits for a slot is not attached when the slot comes
    /// but waits for the resume, detached; a transfer suspended once attached holds its
    /// clock; the clock starts from the moment the last hold ends.
    func testTheIdleClockRunsOnlyWhileConnectedAndUnheld() {
        var machine = Machine(timeouts: TransferTimeouts(idle: 100, total: nil), maximumRedirects: 16, now: 0)
        XCTAssertTrue(machine.queuedForSlot(now: 0))
        _ = machine.suspend(now: 10)
        XCTAssertTrue(machine.slotGranted(now: 20))
        XCTAssertTrue(machine.holdsForResume(taskIsSuspended: false, now: 20), "suspended: not sent")
        XCTAssertFalse(machine.attached(now: 30))
        XCTAssertNil(machine.expiry(at: 10_000), "suspended")
        XCTAssertEqual(machine.resume(now: 10_000), .attach)
        XCTAssertTrue(machine.attached(now: 10_000))
        _ = machine.connecting(now: 10_000)
        XCTAssertTrue(machine.suspend(now: 10_050), "attached: curl pauses")
        XCTAssertNil(machine.expiry(at: 20_000), "suspended")
        XCTAssertEqual(machine.resume(now: 20_000), .continueTransfer, "attached: curl continues")
        XCTAssertNil(machine.expiry(at: 20_099))
        XCTAssertEqual(machine.expiry(at: 20_100).map { caseName(of: $0) }, "idle")
    }

    /// Whatever next exchange comes due while the caller has the task suspended (its start,
    /// a retry after its back-off, a redirect's hop) waits detached for the resume, with no
    /// clock running; a task not suspended is attached as before.
    func testASuspendedTransferWaitsDetachedForResume() throws {
        var fresh = Machine(timeouts: TransferTimeouts(idle: 100, total: nil), maximumRedirects: 16, now: 0)
        XCTAssertFalse(fresh.holdsForResume(taskIsSuspended: false, now: 0), "not suspended: attached")
        XCTAssertEqual(fresh.phase, .ready)
        XCTAssertTrue(fresh.holdsForResume(taskIsSuspended: true, now: 0), "suspended before the driver heard of it")
        XCTAssertEqual(fresh.phase, .awaitingResume)
        XCTAssertTrue(fresh.isSuspended)
        XCTAssertEqual(fresh.holds, [.suspended, .noConnection])
        XCTAssertNil(fresh.expiry(at: 1_000_000))
        XCTAssertFalse(fresh.attached(now: 1), "not until the resume")
        XCTAssertFalse(fresh.suspend(now: 2), "detached: nothing to pause in curl")
        XCTAssertEqual(fresh.resume(now: 3), .attach)
        XCTAssertEqual(fresh.phase, .ready)
        XCTAssertFalse(fresh.isSuspended)
        XCTAssertEqual(fresh.resume(now: 4), .none, "resumed twice: once attached")

        var backingOff = exchanging(.deliver)
        _ = backingOff.exchangeEnded(Machine.EndFacts(), now: 1)
        XCTAssertTrue(backingOff.retrierAsked(error: .timedOut("idle"), now: 1))
        _ = backingOff.retryDecided(.retryAfter(1e-6), now: 2)  // due within the total of 10,000 ns
        XCTAssertFalse(backingOff.suspend(now: 3))
        XCTAssertEqual(backingOff.retryDue(now: 2 + 1_000_000_000), .some(.timedOut("idle")), "the back-off is over")
        XCTAssertTrue(backingOff.holdsForResume(taskIsSuspended: true, now: 2 + 1_000_000_000))
        XCTAssertEqual(backingOff.resume(now: 5_000_000_000), .attach)
        XCTAssertEqual(backingOff.retryCount, 1)

        var redirect = exchanging(.redirect(try hop()))
        var facts = Machine.EndFacts()
        facts.hasRedirectHook = true
        _ = redirect.exchangeEnded(facts, now: 1)
        XCTAssertFalse(redirect.suspend(now: 2), "the hook suspended its task")
        XCTAssertTrue(redirect.redirectAnswered(now: 3))
        redirect.redirectFollowed(now: 3)
        XCTAssertTrue(redirect.holdsForResume(taskIsSuspended: true, now: 3))
        redirect.redirectFollowed(now: 4)
        XCTAssertEqual(redirect.redirectCount, 1, "waiting for the resume is not between exchanges")
        redirect.finish(now: 5)
        XCTAssertEqual(redirect.resume(now: 6), .none, "finished: nothing attaches")
    }

    /// Waiting for the request body's producer holds the idle clock until the server answers:
    /// a producer slower than the timeout is the caller's pace. Its bytes restart the clock;
    /// a head that arrives while it waits (an early answer, a two-way stream) starts it too.
    func testWaitingForTheBodyProducerHoldsTheClockUntilTheHead() {
        var machine = Machine(timeouts: TransferTimeouts(idle: 100, total: nil), maximumRedirects: 16, now: 0)
        machine.attached(now: 0)
        _ = machine.connecting(now: 0)
        machine.bodyProducerFellBehind(now: 50)
        XCTAssertEqual(machine.holds, .bodyProducer)
        XCTAssertNil(machine.expiry(at: 10_000), "the producer's pace is not the server's silence")
        XCTAssertTrue(machine.bodyProducerCaughtUp(now: 10_000))
        XCTAssertTrue(machine.holds.isEmpty)
        XCTAssertNil(machine.expiry(at: 10_099))
        XCTAssertEqual(machine.expiry(at: 10_100).map { caseName(of: $0) }, "idle", "the clock restarted from its bytes")

        machine.bodyProducerFellBehind(now: 10_050)
        XCTAssertNil(machine.expiry(at: 20_000))
        machine.headReceived(.deliver, now: 20_000)
        XCTAssertTrue(machine.holds.isEmpty, "once the server answered, its silence counts again")
        XCTAssertNil(machine.expiry(at: 20_099))
        XCTAssertEqual(machine.expiry(at: 20_100).map { caseName(of: $0) }, "idle")
        XCTAssertTrue(machine.bodyProducerCaughtUp(now: 20_050))
        XCTAssertTrue(machine.suspend(now: 20_060))
        machine.bodyProducerFellBehind(now: 20_065)
        XCTAssertFalse(machine.bodyProducerCaughtUp(now: 20_070), "a suspended task is not continued")
    }

    /// A resume while the transfer has no connection yet does not start the clock: it starts
    /// when libcurl connects.
    func testAResumeBeforeTheConnectionDoesNotStartTheClock() {
        var machine = Machine(timeouts: TransferTimeouts(idle: 100, total: nil), maximumRedirects: 16, now: 0)
        machine.attached(now: 0)
        XCTAssertTrue(machine.suspend(now: 10), "attached: curl pauses")
        XCTAssertEqual(machine.resume(now: 20), .continueTransfer)
        XCTAssertEqual(machine.holds, .noConnection)
        XCTAssertNil(machine.expiry(at: 5_000))
        XCTAssertEqual(machine.connecting(now: 5_000), 5_100)
        XCTAssertEqual(machine.expiry(at: 5_100).map { caseName(of: $0) }, "idle")
    }

    /// A retry that the driver then cannot send (its body cannot be replayed) completes with
    /// the failed attempt's response: the decision alone forgets nothing of it.
    func testARetryDecisionKeepsTheResponseUntilTheRestart() {
        var machine = exchanging(.deliver)
        _ = machine.exchangeEnded(Machine.EndFacts(), now: 1)
        XCTAssertTrue(machine.retrierAsked(error: nil, now: 1))
        XCTAssertFalse(machine.retrierAsked(error: nil, now: 1), "asked once")
        XCTAssertEqual(machine.retryDecided(.retry, now: 2), .retryNow(error: nil))
        XCTAssertTrue(machine.deliversResponse)
        machine.restart(now: 3)
        XCTAssertFalse(machine.deliversResponse)
    }

    /// A suspend that reaches the machine right after the attach, before libcurl started the
    /// transfer (which forgets a pause set then), holds it through the callbacks.
    func testASuspendRightAfterTheAttachHoldsThroughTheCallbacks() {
        var machine = Machine(timeouts: TransferTimeouts(idle: 100, total: nil), maximumRedirects: 16, now: 0)
        machine.attached(now: 0)
        XCTAssertTrue(machine.suspend(now: 0), "attached: curl is asked to pause too")
        _ = machine.connecting(now: 0)
        XCTAssertTrue(machine.isSuspended)
        XCTAssertEqual(machine.holds, .suspended)
        XCTAssertNil(machine.expiry(at: 1_000))
        XCTAssertEqual(machine.bodyArrived(now: 1), .pause)
        XCTAssertFalse(machine.maySend)
    }

    /// Backpressure that ends while the task is suspended is dropped by the resume: no hold
    /// is left behind (the write callback holds again if the consumer is still behind).
    func testBackpressureEndingWhileSuspendedLeavesNoHold() {
        var machine = exchanging(.deliver)
        machine.consumerFellBehind(now: 1)
        XCTAssertTrue(machine.suspend(now: 2))
        XCTAssertFalse(machine.consumerCaughtUp(now: 3), "suspended: resume continues it")
        XCTAssertEqual(machine.resume(now: 4), .continueTransfer)
        XCTAssertTrue(machine.holds.isEmpty)
        XCTAssertEqual(machine.clock.nextDeadline, 104)
    }

    /// The response hook's time is never the server's silence, and its answer restarts the
    /// clock even when the caller suspended meanwhile (the resume then continues it).
    func testTheResponseHooksTimeIsHeldAndItsAnswerLeavesNoHold() {
        var machine = exchanging(.deliver)
        machine.responseHookAsked(now: 0)
        XCTAssertEqual(machine.bodyArrived(now: 1), .pause)
        XCTAssertNil(machine.expiry(at: 1_000))
        _ = machine.suspend(now: 1_000)
        XCTAssertEqual(machine.responseAnswered(cancel: false, now: 2_000), .wait)
        XCTAssertEqual(machine.holds, .suspended, "only the caller's suspension holds after the answer")
        XCTAssertEqual(machine.resume(now: 3_000), .continueTransfer)
        XCTAssertTrue(machine.holds.isEmpty)
        XCTAssertEqual(machine.bodyArrived(now: 3_001), .take)
        XCTAssertEqual(machine.responseAnswered(cancel: false, now: 3_002), .ignore)
    }

    // MARK: - Retries

    func testTheRetriersAnswers() {
        var machine = exchanging(.deliver)
        XCTAssertEqual(machine.retryDecided(.retry, now: 0), .ignore, "not asked")
        machine.attemptTimedOut(now: 1)
        machine.retrierAsked(error: .timedOut("idle"), now: 1)
        XCTAssertEqual(machine.retryDecided(.retryAfter(0), now: 2), .retryNow(error: .timedOut("idle")))
        XCTAssertEqual(machine.retryCount, 1)
        XCTAssertEqual(machine.phase, .ready)

        for bad in [-1, .infinity, .nan, 1e12] as [TimeInterval] {
            var asked = machine
            asked.retrierAsked(error: nil, now: 3)
            XCTAssertEqual(asked.retryDecided(.retryAfter(bad), now: 3), .finish(nil), "\(bad)")
        }

        // A retry due at or past the resource timeout's end would never be sent: the attempt's
        // outcome is the task's now (the machine's total is 10,000 ns from 0).
        for error in [nil, SessionError.timedOut("idle")] {
            var late = machine
            late.retrierAsked(error: error, now: 3)
            XCTAssertEqual(late.retryDecided(.retryAfter(0.5), now: 10), .finish(error))
            XCTAssertEqual(late.retryCount, 1, "no retry counted")
        }
        var lastMoment = machine
        lastMoment.retrierAsked(error: nil, now: 3)
        XCTAssertEqual(lastMoment.retryDecided(.retryAfter(1e-9), now: 9_999), .finish(nil), "due as the total ends")
        lastMoment = machine
        lastMoment.retrierAsked(error: nil, now: 3)
        XCTAssertEqual(lastMoment.retryDecided(.retryAfter(1e-9), now: 9_998), .retryAt(deadline: 9_999, delay: 1e-9, error: nil))

        var endless = Machine(timeouts: TransferTimeouts(idle: 100, total: nil), maximumRedirects: 16, now: 0)
        endless.attached(now: 0)
        _ = endless.connecting(now: 0)
        endless.headReceived(.deliver, now: 0)
        endless.attemptTimedOut(now: 1)
        endless.retrierAsked(error: nil, now: 3)
        XCTAssertEqual(endless.retryDecided(.retryAfter(0.5), now: 10), .retryAt(deadline: 500_000_010, delay: 0.5, error: nil))
        XCTAssertTrue(endless.retryDue(now: 500_000_009) == nil)
        XCTAssertEqual(endless.retryDue(now: 500_000_010), .some(nil))
        XCTAssertEqual(endless.retryCount, 1)
        XCTAssertTrue(endless.retryDue(now: .max) == nil, "due once")

        machine.retrierAsked(error: .cancelled, now: 4)
        XCTAssertEqual(machine.retryDecided(.doNotRetry, now: 5), .finish(.cancelled))
    }

    func testWhichAttemptsTheRetrierIsAskedAbout() {
        XCTAssertTrue(Machine.asksRetrier(error: .timedOut("x"), status: 0, hasStreamedBody: false, canReplayBody: true))
        XCTAssertTrue(Machine.asksRetrier(error: nil, status: 503, hasStreamedBody: false, canReplayBody: true))
        XCTAssertFalse(Machine.asksRetrier(error: nil, status: 399, hasStreamedBody: false, canReplayBody: true))
        XCTAssertFalse(Machine.asksRetrier(error: .cancelled, status: 0, hasStreamedBody: false, canReplayBody: true))
        XCTAssertFalse(Machine.asksRetrier(error: .sessionInvalidated, status: 0, hasStreamedBody: false, canReplayBody: true))
        XCTAssertFalse(Machine.asksRetrier(error: nil, status: 500, hasStreamedBody: true, canReplayBody: true))
        XCTAssertFalse(Machine.asksRetrier(error: nil, status: 500, hasStreamedBody: false, canReplayBody: false))
    }

    /// The total clock ends a transfer in any phase but the last; a back-off is not exempt.
    func testTheTotalClockRunsInEveryPhaseButFinished() throws {
        for (name, machine) in try everyPhase() {
            let expiry = machine.expiry(at: 10_000)
            if machine.phase == .finished {
                XCTAssertNil(expiry, name)
            } else {
                XCTAssertEqual(expiry.map { caseName(of: $0) }, "total", name)
            }
        }
    }
}
