import Foundation
import Serialization
import Synchronization

/// The objects the driver thread made for finished requests — the response head, the body,
/// the metrics — handed back to it once their completions ran, so that the driver frees them.
///
/// glibc's `malloc` puts a small per-thread cache (7 chunks of each size) in front of
/// per-thread arenas. The driver allocates these for every response and the completion queue
/// used to free them: the queue's cache filled after seven of a size, and every further `free`
/// took the driver arena's lock, while the driver, whose own cache those frees never refilled,
/// took the same lock for every allocation of those sizes. At 64 in flight the two threads
/// met there several hundred times a second (`perf`: 5–6% of the process's samples in
/// `__lll_lock_wait_private`/`__lll_lock_wake_private` and the futex calls under them, from
/// `_int_free` on the completion queue and `malloc` on the driver). Freed where they were
/// allocated, they go back to the driver's cache, which its next responses take them from.
/// The completion queue hands them back after a block of completions ran
/// (`CompletionBatch`'s `delivered`), an event monitor's queue after a delivery
/// (`MonitorHub`): whichever lets go last, the driver's release is the one that frees.
///
/// Only while the driver has transfers (it wakes within a second then; `DriverLoop.run`)
/// does it accept anything: before a sleep without transfers it takes back what is here and
/// stops accepting, so nothing waits here while the manager is idle, and while it runs a
/// finished request's parts wait here until the driver's next pass at most. Not taken, and
/// freed where they are as before: bodies over `largestBody` (or past `bodyBudget` in all),
/// and heads whose Foundation response was built or is being built (a Foundation object
/// another thread made; the check does not wait for a build in progress). The parts are
/// Curlew's own objects: freeing them runs no user code on the driver thread (a head whose
/// response a caller builds after it was handed back frees that Foundation object there:
/// deallocation only).
///
/// Sendable: the parts wait under `bin`'s lock; the driver's side (`collect`) is called from
/// the driver thread only.
final class AllocationReturn: Sendable {
    /// What one finished request hands back.
    struct Parts: Sendable {
        let head: HTTPResponseHead?
        let body: Data?
        let metrics: TaskMetrics?
    }

    private struct Bin {
        var parts: [Parts] = []
        var bodyBytes = 0
        var accepting = false
    }

    /// The largest body handed back: larger ones are freed outside glibc's arenas (mapped)
    /// or rarely enough not to matter, and a large body must not wait for the driver.
    static let largestBody = 64 << 10
    /// At most this many requests' parts wait at once (the driver takes them every pass)...
    static let capacity = 4096
    /// ...holding at most this many body bytes: past either bound the completion queue frees.
    static let bodyBudget = 4 << 20

    private let bin = Mutex(Bin())

    /// Hands back the driver-made parts of finished requests whose completions have run
    /// (completion queue). Does nothing while the driver does not accept them: their last
    /// references are then dropped by the caller, as before.
    func handBack(_ finished: UnsafeBufferPointer<SessionEngine.FinishedTransfer>) {
        bin.withLock { bin in
            guard bin.accepting else { return }
            for item in finished {
                let outcome = item.outcome
                guard Self.add(head: outcome.head, body: outcome.body, metrics: outcome.metrics, to: &bin) else { return }
            }
        }
    }

    /// Hands back parts an event monitor's delivery held (its queue): the monitor's events
    /// often hold a response's last references, since they are delivered after the completion.
    func handBack(_ parts: [Parts]) {
        bin.withLock { bin in
            guard bin.accepting else { return }
            for part in parts {
                guard Self.add(head: part.head, body: part.body, metrics: part.metrics, to: &bin) else { return }
            }
        }
    }

    /// Adds what of one request may wait in `bin`; false once the bin is full.
    private static func add(head: HTTPResponseHead?, body: Data?, metrics: TaskMetrics?, to bin: inout Bin) -> Bool {
        guard bin.parts.count < capacity else { return false }
        let head = head.flatMap { $0.mayHoldResponse ? nil : $0 }
        let bodyBytes = body?.count ?? 0
        let body = bodyBytes <= largestBody && bin.bodyBytes + bodyBytes <= bodyBudget ? body : nil
        guard head != nil || body != nil || metrics != nil else { return true }
        if body != nil { bin.bodyBytes += bodyBytes }
        bin.parts.append(Parts(head: head, body: body, metrics: metrics))
        return true
    }

    /// Whether hand-backs are taken now (tests: false once an idle driver sleeps).
    var isAccepting: Bool { bin.withLock { $0.accepting } }

    /// How many requests' parts wait (tests).
    var waitingCount: Int { bin.withLock { $0.parts.count } }

    /// Takes what was handed back into `spare` (empty; its storage goes to the bin, so neither
    /// side allocates in the steady state) and says whether more is accepted until the next
    /// call. The caller drops the parts on the driver thread.
    func collect(into spare: inout [Parts], accepting: Bool) {
        bin.withLock { bin in
            bin.accepting = accepting
            guard !bin.parts.isEmpty else { return }
            swap(&bin.parts, &spare)
            bin.bodyBytes = 0
        }
    }
}
