import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Serialization
import Synchronization
import XCTest

/// A probe for `Scripts/sanitize.sh thread`: a value built on another thread and handed over
/// by a continuation resumed *before* the awaiting task reached its `await` — the path on
/// which the Swift runtime tells ThreadSanitizer nothing (Continuations.swift). The values are
/// checked in every build; under TSan, without this module's Continuations.swift, the reads
/// below are reported as data races (seen: 18 reports, among them the two frames of the
/// failed CI run, `HTTPResponseHead.httpURLResponse`; 0 with the file), and `sanitize.sh`
/// fails the run.
final class ThreadSanitizerHandoffTests: XCTestCase {
    func testAHeadResumedBeforeTheAwaitIsReadWithoutARace() async throws {
        let driver = DispatchQueue(label: "ThreadSanitizerHandoffTests.driver")
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1/handoff"))
        for round in 0..<50 {
            let head = await withCheckedContinuation { (continuation: CheckedContinuation<HTTPResponseHead, Never>) in
                let resumed = ResumeSignal()
                driver.async {
                    continuation.resume(returning: HTTPResponseHead(
                        url: url, statusCode: 200 + round, fields: [("X-Round", "\(round)")]))
                    resumed.raise()
                }
                resumed.wait()  // the resume has happened; the await has not started
            }
            XCTAssertEqual(head.statusCode, 200 + round)
            XCTAssertEqual(head.httpURLResponse?.value(forHTTPHeaderField: "X-Round"), "\(round)")
        }
    }

    func testAThrowingResumeBeforeTheAwaitIsReadWithoutARace() async throws {
        let driver = DispatchQueue(label: "ThreadSanitizerHandoffTests.driver")
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1/handoff"))
        for round in 0..<50 {
            let head = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponseHead, any Error>) in
                let resumed = ResumeSignal()
                driver.async {
                    continuation.resume(returning: HTTPResponseHead(url: url, statusCode: 300 + round, fields: []))
                    resumed.raise()
                }
                resumed.wait()
            }
            XCTAssertEqual(head.httpURLResponse?.statusCode, 300 + round)
        }
    }
}

/// "The resume has happened", told with relaxed atomics: TSan orders nothing by them, so the
/// probe adds no happens-before of its own (a semaphore would, and hide what it looks for).
private final class ResumeSignal: Sendable {
    private let raised = Atomic<Bool>(false)

    func raise() { raised.store(true, ordering: .relaxed) }

    func wait() {
        while !raised.load(ordering: .relaxed) { sched_yield() }
    }
}
