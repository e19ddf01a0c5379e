import Dispatch
import Foundation
import Synchronization

/// The `.taskDidResume` and `.taskDidSuspend` notifications of a manager's data and upload
/// tasks, waiting to be posted on the completion queue with the next thing that goes there.
///
/// Each was posted with an `async` of its own. For `resume()` called off the completion queue
/// (from a Swift task awaiting `dataResponse(for:)`, or a command-line tool's main thread)
/// that `async` woke a worker of the queue only to post it, and the completion followed
/// a few dozen microseconds later with a wakeup of its own: at one request at a time the
/// async API made 6.0 context switches per request where the completion-handler loop made
/// 3.0. Now a notice waits here (the async loop: 4.0 switches per request) and is posted by
/// whichever comes first:
/// - the next completion delivered on the completion queue (`postPending`, before its
///   handler): the request's own, usually;
/// - the driver, once the oldest notice has waited `longestWait` (`flushIfDue`, at the end of
///   a pass; while transfers run, its sleep is bounded by `due`): a start's notice comes with
///   the start command the driver wakes for, or with a completion (a request that cannot be
///   made), so none waits longer than that (20 ms);
/// - a post queued at once (`SessionEngine.postStateNoticesSoon`) for a start that goes to an
///   adapter, the response cache or a reset first (those may take any time and carry
///   nothing), and for `suspend()` and a `resume()` after it (rare; a task still with its
///   adapter is not the driver's yet). So only a start's notice waits for its completion.
///
/// What is kept: the notices are posted on the completion queue, in the order the calls took
/// effect (they are added under the task's lock), and a task's notices before its completion
/// (its completion is queued after its `resume()` added the notice, and is delivered by a
/// `postPending` that runs after it on that serial queue). What changed: work the caller
/// queues on the completion queue right after `resume()` may now run before the notice.
///
/// Downloads post at once, as before (`EngineObservers.postStateNow`): their
/// `downloadTaskDidMoveFileSuccessfully` is posted on the operation queue, before the
/// completion, and must come after their `taskDidResume`.
final class StateNotices: Sendable {
    /// How long a notice may wait for a completion to carry it (uptime nanoseconds): 20 ms.
    /// A shorter bound cost the driver's sleeps: a 1 ms one added 6–9 µs of CPU per request
    /// at one request at a time (`perf stat`, 20,000 requests, three rounds: 56–59 µs against
    /// 50–54 with 20 ms and 49–51 with 200 ms), a near timer armed and cancelled at every
    /// sleep on this virtual machine.
    static let longestWait: UInt64 = 20_000_000

    private struct Waiting {
        var notices: [(Notification.Name, SessionTask)] = []
        /// An emptied list kept for the next round: posting takes the list's storage away, and
        /// a fresh one for every request's notice cost its allocation, its growth and its free
        /// (~300 instructions per request, callgrind at 64 in flight).
        var spare: [(Notification.Name, SessionTask)] = []
        /// Whether the driver has queued a `postPending` that has not run yet.
        var flushQueued = false
    }

    private let waiting = Mutex(Waiting())
    /// When the oldest waiting notice is due (uptime ns; 0: none waits). Written under the
    /// mutex; read without it by `postPending`'s and the driver's fast paths.
    private let dueTime = Atomic<UInt64>(0)

    init() {}

    /// Queues `name` for `task`. Called under the task's lock, so that racing `resume()` and
    /// `suspend()` calls are posted in the order they took effect.
    /// `now` (uptime ns) is read only when the list was empty: a notice behind others adds no
    /// clock read.
    func add(_ name: Notification.Name, for task: SessionTask, now: UInt64? = nil) {
        waiting.withLock { waiting in
            if waiting.notices.isEmpty {
                let now = now ?? DispatchTime.now().uptimeNanoseconds
                // Saturating, and never 0 (which means "none waits").
                let due = now > UInt64.max - Self.longestWait ? UInt64.max : max(1, now + Self.longestWait)
                dueTime.store(due, ordering: .releasing)
            }
            waiting.notices.append((name, task))
        }
    }

    /// When the oldest waiting notice is due (uptime ns), nil when none waits.
    var due: UInt64? {
        let due = dueTime.load(ordering: .acquiring)
        return due == 0 ? nil : due
    }

    /// Posts every waiting notice, oldest first. On the completion queue only.
    func postPending() {
        guard dueTime.load(ordering: .acquiring) != 0 else { return }
        var notices = waiting.withLock { waiting -> [(Notification.Name, SessionTask)] in
            waiting.flushQueued = false
            dueTime.store(0, ordering: .releasing)
            // The waiting list is taken; the spare (empty, with its capacity) waits instead.
            var taken: [(Notification.Name, SessionTask)] = []
            swap(&taken, &waiting.spare)
            swap(&taken, &waiting.notices)
            return taken
        }
        for (name, task) in notices { NotificationCenter.default.post(name: name, object: task) }
        notices.removeAll(keepingCapacity: true)
        // Two posts at once (a concurrent completion queue): one list is kept, the other freed.
        waiting.withLock { waiting in if waiting.spare.capacity == 0 { swap(&waiting.spare, &notices) } }
    }

    /// What `flushIfDue` did.
    enum Check: Equatable {
        /// Nothing waits, or a post queued earlier will take what waits.
        case nothing
        /// Notices wait, not due yet: check again at this uptime (ns).
        case checkAt(UInt64)
        /// A post was queued now.
        case queuedPost

        /// When the driver must check again (uptime ns; `.max`: no need).
        var nextCheck: UInt64 {
            if case .checkAt(let time) = self { return time }
            return .max
        }
    }

    /// The driver's check at the end of a pass: when the oldest notice is due at `now` and no
    /// post is queued yet, queues one on `queue`.
    func flushIfDue(now: UInt64, on queue: @autoclosure () -> DispatchQueue) -> Check {
        let due = dueTime.load(ordering: .acquiring)
        guard due != 0 else { return .nothing }
        guard now >= due else { return .checkAt(due) }
        let queues = waiting.withLock { waiting -> Bool in
            guard !waiting.notices.isEmpty, !waiting.flushQueued else { return false }
            waiting.flushQueued = true
            return true
        }
        guard queues else { return .nothing }
        queue().async { self.postPending() }
        return .queuedPost
    }
}
