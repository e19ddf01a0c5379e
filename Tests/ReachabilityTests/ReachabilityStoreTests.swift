import Dispatch
import Foundation
import Synchronization
@testable import Reachability
import XCTest

/// `ReachabilityStore` between the monitor thread that publishes and the Swift tasks that
/// await `statusUpdates` and are cancelled.
final class ReachabilityStoreTests: XCTestCase {
    /// A publish resumes a waiting subscriber (which takes the Swift task's status lock)
    /// while a cancel of that task, under its status lock, ends the stream (whose end takes
    /// the store's lock). Publishing under the store's lock deadlocked the two: seen as a
    /// manager's driver thread stuck in `ConnectivityWait.cancel()` for good.
    func testCancellingSubscribersWhilePublishingNeverDeadlocks() {
        let store = ReachabilityStore()
        let generation = store.nextGeneration()
        let done = DispatchSemaphore(value: 0)
        let cancellingEnded = Atomic<Bool>(false)
        let publishing = Thread {
            let paths = [NetworkPath(status: .notReachable), NetworkPath(status: .reachableViaEthernet)]
            var round = 0
            while !cancellingEnded.load(ordering: .acquiring), round < 50_000_000 {
                store.publish(paths[round % 2], generation: generation)
                round += 1
            }
            done.signal()
        }
        let cancelling = Thread {
            for index in 0..<3_000 {
                let subscriber = Task.detached {
                    for await _ in store.makeStream() {}
                }
                usleep(useconds_t(index % 4 * 50))  // the subscriber is waiting for its next status, or about to
                subscriber.cancel()
            }
            cancellingEnded.store(true, ordering: .releasing)
            done.signal()
        }
        publishing.start()
        cancelling.start()
        // A bound on a hang, not a timing assertion: the loops take a few seconds.
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "publishing deadlocked")
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "cancelling deadlocked")
    }
}
