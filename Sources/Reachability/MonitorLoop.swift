import Dispatch
import Foundation
import Glibc
import Synchronization

/// The monitor thread's body: reads events, keeps the link table, debounces, evaluates
/// and publishes. Every member is touched only by the monitor thread.
final class MonitorLoop {
    private let monitor: ReachabilityMonitor
    private let events: NetlinkSocket
    private let target: ReachabilityTarget
    private let configuration: MonitorConfiguration
    private let store: ReachabilityStore
    private let generation: UInt64
    private let evaluator: PathEvaluator
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    /// An evaluation is due at `deadline`.
    private var pending = false
    private var firstEventTime: UInt64 = 0
    private var deadline: UInt64 = 0
    /// The link table may have missed events (overrun or unparsable datagram).
    private var needsResynchronization = true
    /// Domain resolution state.
    private var resolved: [IPAddress]?
    private var resolving = false
    private var resolveAgain = false

    /// Datagrams read per wake-up before evaluating deadlines again.
    static let maximumDatagramsPerPass = 4096

    init(monitor: ReachabilityMonitor, events: NetlinkSocket, queries: NetlinkSocket, target: ReachabilityTarget,
         configuration: MonitorConfiguration, store: ReachabilityStore, generation: UInt64) {
        self.monitor = monitor
        self.events = events
        self.target = target
        self.configuration = configuration
        self.store = store
        self.generation = generation
        evaluator = PathEvaluator(client: RtnetlinkClient(socket: queries),
                                  classifier: InterfaceClassifier(sysfsRoot: configuration.sysfsRoot))
    }

    func run() {
        startResolution()
        // The first evaluation is not debounced: the initial status should be known at once.
        pending = true
        deadline = Self.now()
        var descriptors = [pollfd(fd: monitor.wakeReader, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: events.descriptor, events: Int16(POLLIN), revents: 0)]
        // The thread's lifetime loop: each pass blocks in poll(2) until an event, a wake-up
        // or the debounce deadline, so an idle monitor uses no CPU.
        while true {
            let (stop, paused, resolution) = monitor.state.withLock { shared in
                defer { shared.pendingResolution = nil }
                return (shared.stopRequested, shared.eventsPaused, shared.pendingResolution)
            }
            if stop { return }
            if let resolution { resolutionArrived(resolution) }
            if pending, Self.now() >= deadline { evaluate() }

            let timeout: Int32
            if pending {
                let remaining = deadline > Self.now() ? deadline - Self.now() : 0
                timeout = Int32(min((remaining + 999_999) / 1_000_000, 60_000))
            } else {
                timeout = -1
            }
            for index in descriptors.indices { descriptors[index].revents = 0 }
            let ready = poll(&descriptors, paused ? 1 : 2, timeout)
            if ready < 0 && errno != EINTR {
                // poll itself failing means the descriptors are gone; nothing can be watched.
                return
            }
            if descriptors[0].revents != 0 { drainWakeups() }
            if !paused && descriptors[1].revents != 0 { drainEvents() }
        }
    }

    private func drainWakeups() {
        var bytes = [UInt8](repeating: 0, count: 256)
        // Bounded: the pipe is non-blocking; a short read means it is empty.
        for _ in 0 ..< 64 where read(monitor.wakeReader, &bytes, bytes.count) < bytes.count {
            break
        }
    }

    /// Reads every queued datagram (bounded per pass), updating the link table.
    private func drainEvents() {
        for _ in 0 ..< Self.maximumDatagramsPerPass {
            let received: NetlinkSocket.Received
            do {
                received = try events.receive(into: &buffer, blocking: false)
            } catch {
                needsResynchronization = true
                schedule()
                return
            }
            switch received {
            case .wouldBlock:
                return
            case .overrun:
                // Reported once per overflow: whatever was lost, re-read everything.
                monitor.state.withLock { $0.overruns += 1 }
                needsResynchronization = true
                routingChanged()
            case .datagram(let count):
                do {
                    var routing = false
                    for message in try NetlinkMessageParser.messages(in: buffer, count: count) {
                        if try evaluator.apply(message) { routing = true }
                    }
                    if routing { routingChanged() } else { schedule() }
                } catch {
                    needsResynchronization = true
                    routingChanged()
                }
            }
        }
    }

    /// Debounce: evaluate after a quiet period, at most `maximumDelay` after the first event.
    private func schedule() {
        let now = Self.now()
        if !pending {
            pending = true
            firstEventTime = now
        }
        deadline = min(now + Self.nanoseconds(configuration.quietPeriod),
                       firstEventTime + Self.nanoseconds(configuration.maximumDelay))
    }

    private func routingChanged() {
        // Routes decide which addresses a name resolves to (split DNS, VPN resolvers). A change
        // during the first resolution asks for another one too: that resolution may have
        // asked before the route existed (the network coming up), and its empty answer stood.
        if resolved != nil || resolving { startResolution() }
        schedule()
    }

    private func evaluate() {
        pending = false
        do {
            if needsResynchronization {
                try evaluator.resynchronize()
                needsResynchronization = false
                monitor.state.withLock { $0.resynchronizations += 1 }
            }
            monitor.state.withLock { $0.evaluations += 1 }
            if let path = try evaluator.path(for: target, resolved: resolved) {
                store.publish(path, generation: generation)
            }
        } catch {
            // The conversation with the kernel failed (timeout, overrun of a reply, malformed
            // data): re-read everything at the next deadline instead of publishing a guess.
            needsResynchronization = true
            pending = true
            firstEventTime = Self.now()
            deadline = firstEventTime + Self.nanoseconds(configuration.maximumDelay)
        }
    }

    private func startResolution() {
        guard let domain = target.domain else { return }
        if resolving {
            resolveAgain = true
            return
        }
        resolving = true
        let monitor = self.monitor
        // A thread started from this one shares its network namespace, so the name is
        // resolved where the routes are looked up.
        let thread = Thread { monitor.deliverResolution(DomainResolver.resolve(domain)) }
        thread.name = "Curlew.Reachability.resolver"
        thread.start()
    }

    private func resolutionArrived(_ addresses: [IPAddress]) {
        resolving = false
        resolved = addresses
        if resolveAgain {
            resolveAgain = false
            startResolution()
        }
        // A resolution is already the outcome of a change: evaluate promptly.
        pending = true
        deadline = Self.now()
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    private static func nanoseconds(_ seconds: Double) -> UInt64 { UInt64(max(seconds, 0) * 1_000_000_000) }
}
