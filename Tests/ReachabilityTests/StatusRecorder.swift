import Foundation
import Glibc
@testable import Reachability

/// Records every status a manager's change block reports, and lets a test wait (bounded)
/// until a condition on the manager holds.
final class StatusRecorder: @unchecked Sendable {  // `condition` guards `statuses`
    private let condition = NSCondition()
    private var statuses: [(status: NetworkReachabilityStatus, time: Date)] = []
    let manager: NetworkReachabilityManager

    init(_ manager: NetworkReachabilityManager) {
        self.manager = manager
        manager.setReachabilityStatusChangeBlock { [weak self] status in
            guard let self else { return }
            condition.lock()
            statuses.append((status, Date()))
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Every status the block received, in order.
    var received: [NetworkReachabilityStatus] {
        condition.lock()
        defer { condition.unlock() }
        return statuses.map(\.status)
    }

    /// When the block last received `status`.
    func lastTime(of status: NetworkReachabilityStatus) -> Date? {
        condition.lock()
        defer { condition.unlock() }
        return statuses.last(where: { $0.status == status })?.time
    }

    /// Waits until the block has reported `status` as its latest value (and the manager
    /// agrees), at most `timeout` seconds. Returns whether it happened. The limit only
    /// stops a broken run; a working one returns within a second even on a loaded machine.
    @discardableResult
    func wait(for status: NetworkReachabilityStatus, timeout: TimeInterval = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        // Bounded by the deadline: each wait returns at the latest then.
        while !(statuses.last?.status == status && manager.networkReachabilityStatus == status) {
            if !condition.wait(until: deadline) {
                return statuses.last?.status == status && manager.networkReachabilityStatus == status
            }
        }
        return true
    }

    /// Waits (at most `timeout` seconds) until the monitor has evaluated a state in which
    /// `path` holds, then until every change block published up to then has run. Tests end
    /// a burst of kernel changes with a marker that only `path` shows (the default route
    /// moving to another gateway), so this orders "the monitor has seen the whole burst"
    /// without guessing how long a loaded machine needs.
    @discardableResult
    func wait(untilPath path: (NetworkPath) -> Bool, timeout: TimeInterval = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        // The path changes without a status change call no block, so this polls (bounded).
        while !(manager.networkPath.map(path) ?? false) {
            guard Date() < deadline else { return false }
            usleep(10_000)
        }
        // The store enqueues each change block in the same critical section that records
        // the path, so a barrier on its serial queue runs after all of them.
        manager.store.queue.sync {}
        return true
    }

    /// Waits `seconds` for further reports (used to check that nothing more arrives).
    func settle(_ seconds: TimeInterval) {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while condition.wait(until: deadline) {}
    }
}
