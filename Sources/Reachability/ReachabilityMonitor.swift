import Dispatch
import Foundation
import Glibc
import Synchronization

/// The running part of a manager: a dedicated thread blocked in poll(2) on a NETLINK_ROUTE
/// socket and a self-pipe, so it costs no CPU while nothing changes. The sockets are opened
/// by `start` on the caller's thread, so they belong to the caller's network namespace.
final class ReachabilityMonitor: Sendable {
    /// State shared by the thread, the resolver threads and the owner; all under `state`'s lock.
    struct Shared {
        var stopRequested = false
        /// Set (with the pipe closed) by the thread as it exits; wake-ups stop then.
        var closed = false
        var eventsPaused = false
        var pendingResolution: [IPAddress]?
        var overruns = 0
        var resynchronizations = 0
        var evaluations = 0
        var thread: pthread_t?
        /// The monitor thread's kernel task id (diagnostics: its CPU time is in
        /// /proc/self/task/TID/stat).
        var taskID: Int32?
    }

    let state = Mutex(Shared())
    /// The self-pipe's read end, in the thread's poll set.
    let wakeReader: Int32
    private let wakeWriter: Int32
    private let finished = DispatchSemaphore(value: 0)

    private init(wakeReader: Int32, wakeWriter: Int32) {
        self.wakeReader = wakeReader
        self.wakeWriter = wakeWriter
    }

    /// Opens the sockets in the calling thread's namespace and starts the monitor thread.
    static func start(target: ReachabilityTarget, configuration: MonitorConfiguration,
                      store: ReachabilityStore, generation: UInt64) throws -> ReachabilityMonitor {
        let groups = Netlink.groupLink | Netlink.groupIPv4Address | Netlink.groupIPv4Route | Netlink.groupIPv4Rule
            | Netlink.groupIPv6Address | Netlink.groupIPv6Route
        let events = try NetlinkSocket.open(groups: groups,
                                            extraGroups: [Netlink.groupNumberIPv6Rule, Netlink.groupNumberNexthop],
                                            receiveBufferSize: configuration.eventBufferSize, receiveTimeout: nil)
        let queries: NetlinkSocket
        do {
            queries = try NetlinkSocket.open(groups: 0, receiveBufferSize: nil, receiveTimeout: configuration.queryTimeout)
        } catch {
            events.close()
            throw error
        }
        // A self-pipe wakes poll(2): Glibc's Swift module imports neither eventfd nor pipe2,
        // so the flags are set right after creation (a fork in between could inherit the
        // ends, which costs that child two descriptors and nothing else).
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else {
            let code = errno
            events.close()
            queries.close()
            throw NetlinkSocketError(operation: "pipe", code: code)
        }
        for end in pipeEnds {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        let monitor = ReachabilityMonitor(wakeReader: pipeEnds[0], wakeWriter: pipeEnds[1])
        let thread = Thread {
            let taskID = Self.currentTaskID()
            monitor.state.withLock { shared in
                shared.thread = pthread_self()
                shared.taskID = taskID
            }
            let loop = MonitorLoop(monitor: monitor, events: events, queries: queries, target: target,
                                   configuration: configuration, store: store, generation: generation)
            loop.run()
            events.close()
            queries.close()
            monitor.state.withLock { shared in
                shared.closed = true
                _ = close(monitor.wakeReader)
                _ = close(monitor.wakeWriter)
            }
            monitor.finished.signal()
        }
        thread.name = "Curlew.Reachability.monitor"
        thread.start()
        return monitor
    }

    /// Asks the thread to stop and waits for it to close its sockets (unless called on the
    /// monitor thread itself, which must not wait for itself).
    func stop() {
        let onMonitorThread = state.withLock { shared -> Bool in
            shared.stopRequested = true
            if let thread = shared.thread { return pthread_equal(thread, pthread_self()) != 0 }
            return false
        }
        wake()
        if !onMonitorThread {
            // Bounded: a query conversation waits at most queryTimeout before giving up.
            _ = finished.wait(timeout: .now() + 30)
        }
    }

    /// Interrupts poll(2). A no-op once the thread has closed the pipe, so a late
    /// resolver can never write to a reused descriptor number.
    func wake() {
        state.withLock { shared in
            guard !shared.closed else { return }
            // A full pipe already guarantees a pending wake-up, so EAGAIN is fine.
            var one: UInt8 = 1
            _ = write(wakeWriter, &one, 1)
        }
    }

    /// The calling thread's task id, from the /proc/thread-self link ("PID/task/TID"),
    /// because Glibc's Swift module does not import gettid().
    private static func currentTaskID() -> Int32? {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.split(separator: "/").last.flatMap { Int32($0) }
    }

    /// Hands a resolver thread's answer to the monitor thread.
    func deliverResolution(_ addresses: [IPAddress]) {
        state.withLock { $0.pendingResolution = addresses }
        wake()
    }

    /// Test hook: while paused the thread does not read the event socket, so the kernel's
    /// queue fills up as it would behind a stalled consumer.
    func setEventsPaused(_ paused: Bool) {
        state.withLock { $0.eventsPaused = paused }
        wake()
    }
}
