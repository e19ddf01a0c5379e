internal import CCurl
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs one curl multi handle on one dedicated thread: the manager's serial driver context.
///
/// Other threads talk to it only through `submit(_:)`, which appends to a locked inbox and
/// wakes `curl_multi_poll` with `curl_multi_wakeup` (documented thread-safe). Everything
/// else — the multi handle, easy handles, share handle, per-task delegates — lives in a
/// `DriverLoop` that is created on the driver thread and never leaves it.
///
/// `curl_multi_poll` + `curl_multi_wakeup` was chosen over `socket_action` by measurement:
/// faster from 64 to 2,000 connections on this class of machine (perf.md §3.1), and it
/// blocks in `poll(2)` with no timeout when idle: 0% CPU.
final class TransferDriver: Sendable {
    /// Work the driver thread performs, in submission order.
    enum Command: Sendable {
        case start(SessionTask)
        case cancel(SessionTask, SessionError)
        case pause(SessionTask)
        case unpause(SessionTask)
        /// Backpressure relief: the consumer drained a streamed body.
        case resumeReading(SessionTask)
        /// The request body's pump has data (or its end) for a read that paused.
        case resumeSending(SessionTask)
        /// The redirection hook answered about the proposed hop: follow the request it
        /// returned, or deliver the 3xx when nil.
        case redirectDecision(SessionTask, RedirectPolicy.Hop, URLRequest?)
        /// The authentication challenge handler answered (server trust or HTTP 401).
        case challengeDecision(SessionTask, AuthChallengeDisposition)
        /// The data task's response hook answered about the delivered response.
        case responseDecision(SessionTask, ResponseDisposition)
        /// The request retrier answered about a failed attempt; with a request adapter, the
        /// request to send next (or why it cannot be sent).
        case retryDecision(SessionTask, RetryDecision, Result<AdaptedRequest, SessionError>?)
        /// The wait for a route ended (`ConnectivityWait`): it `returned`, or was there all along.
        case connectivityDecision(SessionTask, returned: Bool)
        /// The wait for a route found none (`ConnectivityWait`): the monitors hear of it here,
        /// only while the transfer still waits (never after its completion).
        case connectivityWaiting(SessionTask)
        /// Tear down once no transfer is left, then call the closure (from the driver thread).
        case shutdown(@Sendable () -> Void)
    }

    /// The multi handle's address, shared with submitters only for `curl_multi_wakeup`.
    struct MultiPointer: @unchecked Sendable {
        // @unchecked: submitters use it only for curl_multi_wakeup, counted in `wakesInFlight`
        // under the inbox lock while `closed` is false; `close()` sets `closed` and waits for
        // that count to reach zero before the driver cleans the handle up.
        let raw: UnsafeMutableRawPointer
    }

    private struct Inbox {
        var commands: [Command] = []
        var closed = false
    }

    private let inbox = Mutex(Inbox())
    /// Submitters between deciding to wake the driver (under the inbox lock) and returning
    /// from `curl_multi_wakeup` (outside it). The write to curl's wakeup socket used to happen
    /// under the lock, and the driver, woken by that very write, often reached `drain()` while
    /// the submitter still held the lock: both threads then went to the kernel (Mutex's
    /// priority-inheriting futex, ~0.6 FUTEX_LOCK_PI per request at one request at a time).
    private let wakesInFlight = Atomic<Int>(0)
    private let multi: MultiPointer
    let identifier: Int
    /// The driver thread's kernel id, once it runs (for CPU accounting in tests and tools).
    let threadID = Mutex<Int32?>(nil)

    /// Creates the multi handle and starts the driver thread.
    init(configuration: SessionConfiguration, engine: SessionEngine, identifier: Int) throws(SessionError) {
        if case .failure(let error) = CurlRuntime.state { throw error }
        guard let handle = curl_multi_init() else {
            throw .curl(code: Int(CURLM_OUT_OF_MEMORY.rawValue), message: "curl_multi_init failed")
        }
        multi = MultiPointer(raw: handle)
        self.identifier = identifier
        let multi = self.multi
        let name = "curlew.drv.\(identifier)"  // Linux thread names hold 15 bytes
        let thread = Thread { [self] in
            // The kernel's name too: Foundation keeps `Thread.name` to itself on Linux, and
            // `top -H`, `ps -L`, crash reports and perf read the kernel's (which the thread
            // otherwise inherits from whichever thread created the manager).
            TransferDriver.nameKernelThread(name)
            threadID.withLock { $0 = TransferDriver.currentThreadID() }
            engine.debugLog?.debug("driver curlew.drv.\(identifier) started")
            // The loop and everything it owns are born here and die here.
            guard let loop = DriverLoop(multi: multi.raw, driver: self, engine: engine) else {
                self.failAll(engine: engine)
                return
            }
            loop.run()
        }
        thread.name = name
        thread.start()
    }

    /// Sets the calling thread's kernel name (15 bytes at most) by writing
    /// "/proc/thread-self/comm" (pthread_setname_np and prctl are not imported by Glibc's
    /// Swift module). Best effort: a name is a diagnostic.
    static func nameKernelThread(_ name: String) {
        let file = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard file >= 0 else { return }
        defer { Glibc.close(file) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
    }

    /// The calling thread's kernel id: "/proc/thread-self" links to "PID/task/TID"
    /// (gettid(2) is not exported by Glibc's Swift module).
    static func currentThreadID() -> Int32? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") else { return nil }
        return target.split(separator: "/").last.flatMap { Int32($0) }
    }

    /// Queues a command for the driver thread. Returns false once the driver has shut down.
    ///
    /// Only the command that makes the inbox non-empty wakes the driver (a write to curl's
    /// wakeup pipe, and a poll(2) return): the driver drains the whole inbox at once and
    /// checks it again before it sleeps, so later commands ride on that wakeup.
    @discardableResult
    func submit(_ command: Command) -> Bool {
        let wakes = inbox.withLock { inbox -> Bool? in
            guard !inbox.closed else { return nil }
            inbox.commands.append(command)
            guard inbox.commands.count == 1 else { return false }
            // Counted before the lock is released: `close()` takes the lock after this.
            wakesInFlight.add(1, ordering: .relaxed)
            return true
        }
        guard let wakes else { return false }
        if wakes {
            _ = curl_multi_wakeup(multi.raw)
            wakesInFlight.subtract(1, ordering: .releasing)
        }
        return true
    }

    /// Takes every queued command into `taken`, which must be empty (driver thread). The two
    /// arrays trade places, so each keeps its storage from pass to pass: returning a copy
    /// and emptying the inbox's array allocated a new buffer for it at every pass (the copy
    /// still shared the old one), ~600 instructions.
    func drain(into taken: inout [Command]) {
        inbox.withLock { inbox in
            guard !inbox.commands.isEmpty else { return }
            swap(&inbox.commands, &taken)
        }
    }

    var hasPendingCommands: Bool { inbox.withLock { !$0.commands.isEmpty } }

    /// Refuses further commands and returns the ones that arrived meanwhile (driver thread,
    /// just before `curl_multi_cleanup`).
    func close() -> [Command] {
        let pending = inbox.withLock { inbox in
            inbox.closed = true
            defer { inbox.commands.removeAll() }
            return inbox.commands
        }
        // No new wake can start now; one still writing to curl's wakeup socket finishes
        // before the multi handle may be cleaned up (a single send(2): a few microseconds).
        while wakesInFlight.load(ordering: .acquiring) > 0 { sched_yield() }
        return pending
    }

    /// The driver could not even set up: every command fails.
    private func failAll(engine: SessionEngine) {
        for command in close() {
            DriverLoop.reject(command, engine: engine)
        }
        curl_multi_cleanup(multi.raw)
    }
}

/// A retry's request as the adapter returned it, validated for curl.
struct AdaptedRequest: Sendable {
    let request: URLRequest
    let prepared: PreparedRequest
    /// When its adaptation began (`TaskDelegate.uptime`); nil for a retry's.
    var started: UInt64?
}
