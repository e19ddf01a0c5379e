import Dispatch
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An event as the engine produces it: values only, so the driver thread builds nothing
/// costly (Foundation's `HTTPURLResponse` is made from the head on the monitors' side).
enum MonitorEvent: Sendable {
    case created(SessionTask)
    case resumed(SessionTask)
    case suspended(SessionTask)
    case cancelled(SessionTask)
    case willSend(SessionTask, URLRequest)
    case redirect(SessionTask, HTTPResponseHead, URLRequest)
    case received(SessionTask, HTTPResponseHead)
    /// The retrier's delay, and the failed attempt's error or (for a status of 400 or more) head.
    case willRetry(SessionTask, TimeInterval, SessionError?, HTTPResponseHead?)
    /// The attempt failed for want of a route; the task waits for one (`waitsForConnectivity`).
    case waitingForConnectivity(SessionTask)
    /// The completion: `didFinishCollecting`, `didCompleteWithError`, `didProduce`, in order.
    case finished(Completion)
    /// The manager, held from the emit until every monitor was told (nil: it was gone).
    case invalidated(URLSessionManager?)

    /// A completion's values in one object. The event is copied into each monitor's list and
    /// out of it again: as a reference each copy is a retain, where copying and destroying
    /// the metrics, the error and the whole `DataResponse` went through their value
    /// witnesses every time (~2,000 instructions per request with one monitor, callgrind).
    final class Completion: Sendable {
        let task: SessionTask
        let metrics: TaskMetrics
        let error: SessionError?
        let response: DataResponse

        init(_ task: SessionTask, _ metrics: TaskMetrics, _ error: SessionError?, _ response: DataResponse) {
            self.task = task
            self.metrics = metrics
            self.error = error
            self.response = response
        }
    }
}

/// Hands a manager's events to its monitors (`URLSessionManager.eventMonitors`).
///
/// Events come from several threads — the caller's (create, resume, suspend, cancel), the
/// driver's (each attempt, redirects, response heads, retries), the completion queue — each
/// in the order its causes happened. Each monitor has its own list of pending events,
/// appended under a lock in that order and delivered on the monitor's queue by one block that
/// takes the whole list, `deliveryWindow` after the list's first event. So each monitor sees
/// one task's events in order (two tasks' events emitted at the same moment on two threads
/// may reach two monitors in different orders: each monitor's list is its own); the emitting
/// thread only appends a value, and schedules the block when the list was empty; one block
/// carries all the events of a `deliveryWindow`. There is no queue of the hub's own in between:
/// the first version had one, and at one request at a time every event then woke two threads
/// (the hub's queue, then the monitor's), +46 µs of CPU per request. Foundation values
/// (`HTTPURLResponse` for `didReceive` and redirects) are built on the monitor's queue, once
/// per head (the head keeps what it built), never on the driver thread. The engine has a hub
/// only when monitors were given, so without them the request path checks one `let`.
final class MonitorHub: Sendable {
    /// One monitor, its queue, and the events waiting for it.
    private final class Target: Sendable {
        let monitor: any EventMonitor
        let queue: DispatchQueue
        let receivesFoundationResponses: Bool
        let lists = Mutex<Lists>(Lists())

        /// `pending` fills while a delivery runs; `spare` is the emptied list of the last
        /// delivery, kept with its storage, so that steady delivery allocates nothing.
        struct Lists {
            var pending = MonitorEventList()
            var spare: MonitorEventList?
        }

        init(_ monitor: any EventMonitor) {
            self.monitor = monitor
            queue = MonitorHub.serialDelivery(to: monitor.queue)
            receivesFoundationResponses = monitor.receivesFoundationResponses
        }
    }

    /// How long the first event of a batch waits for others: one request at a time makes five
    /// events about 20–100 µs apart, and a delivery per event woke the monitor's queue five
    /// times per request (11 context switches per request against 3.4 without a monitor, `perf
    /// stat`); one delivery per window at most makes that a fraction of one. 5 ms, not 1: each
    /// window's timer and the worker it wakes cost ~40 µs of CPU on this VM, so with 1 ms one
    /// monitor still added 4–8 µs of CPU per request at one request at a time (`perf stat`,
    /// 20,000 requests, three alternating rounds: 56–59 µs against 50–53 without a monitor;
    /// 50–54.5 with 5 ms, 52.6–54.5 with 10 ms). Monitors observe, they do not steer, so a
    /// few milliseconds late is not late.
    static let deliveryWindow = DispatchTimeInterval.milliseconds(5)

    /// The monitors given at init, in order.
    let monitors: [any EventMonitor]
    private let targets: [Target]
    /// The manager, for `managerDidInvalidate` (weak: the engine must not keep it alive).
    private let owner = Mutex<WeakManager>(WeakManager())

    private struct WeakManager {
        weak var manager: URLSessionManager?
    }

    /// Where a delivery hands back the response heads, bodies and metrics its events held
    /// (the driver made them, and frees them best: `AllocationReturn`).
    private let allocationReturn: AllocationReturn

    /// nil when `monitors` is empty: then nothing is dispatched at all.
    init?(monitors: [any EventMonitor], allocationReturn: AllocationReturn) {
        guard !monitors.isEmpty else { return nil }
        self.monitors = monitors
        targets = monitors.map(Target.init)
        self.allocationReturn = allocationReturn
    }

    func attach(to manager: URLSessionManager) {
        owner.withLock { $0.manager = manager }
    }

    /// Tells every monitor the manager was invalidated. The manager is taken now and held
    /// until they were told: a caller that releases it right after `waitUntilInvalidated()`
    /// does not make the event disappear.
    func emitInvalidated() {
        emit(.invalidated(owner.withLock { $0.manager }))
    }

    /// A serial queue whose blocks run on `queue`: the monitor's events in the order they
    /// happened whatever its queue is. On a concurrent one, a delivery that began while the
    /// last still ran (a monitor slower than the window) ran beside it, and one task's events
    /// arrived out of order. Blocks still run on the monitor's queue, whose specifics
    /// (`getSpecific`, `dispatchPrecondition`) they see.
    static func serialDelivery(to queue: DispatchQueue) -> DispatchQueue {
        DispatchQueue(label: "Curlew.EventMonitor.delivery", target: queue)
    }

    /// Queues `event` for every monitor; returns at once.
    func emit(_ event: consuming MonitorEvent) {
        // A copy for every monitor but the last, which takes the event itself: with one
        // monitor, no copy (a retain of each payload) and no destroy (their release) here.
        let last = targets.count - 1
        for index in 0..<last { enqueue(copy event, for: targets[index]) }
        enqueue(event, for: targets[last])
    }

    private func enqueue(_ event: consuming MonitorEvent, for target: Target) {
        var moving: MonitorEvent? = consume event  // moved into the lock's closure, not copied
        let schedules = target.lists.withLock { lists -> Bool in
            if let event = moving.take() { lists.pending.append(event) }
            return lists.pending.count == 1
        }
        if schedules {
            target.queue.asyncAfter(deadline: .now() + Self.deliveryWindow) { [self] in deliver(to: target) }
        }
    }

    /// Calls `target`'s monitor with everything queued for it so far (on its queue).
    private func deliver(to target: Target) {
        let batch = target.lists.withLock { lists -> MonitorEventList in
            let taken = lists.pending
            // The last delivery's list, drained; a new one if a delivery still runs (a
            // monitor's queue may be concurrent).
            lists.pending = lists.spare ?? MonitorEventList()
            lists.spare = nil
            return taken
        }
        // Each event released after its call: the tasks go now, not at the next batch. What
        // the driver made for the responses goes back to it, as the completion's does.
        var returned: [AllocationReturn.Parts] = []
        batch.drain { event in
            call(target.monitor, with: event, foundation: target.receivesFoundationResponses)
            Self.collectParts(of: event, into: &returned)
        }
        if !returned.isEmpty { allocationReturn.handBack(returned) }
        target.lists.withLock { if $0.spare == nil { $0.spare = batch } }
    }

    /// The driver-made parts an event holds: a received head, a completion's response.
    private static func collectParts(of event: MonitorEvent, into parts: inout [AllocationReturn.Parts]) {
        switch event {
        case .received(_, let head):
            parts.append(AllocationReturn.Parts(head: head, body: nil, metrics: nil))
        case .finished(let completion):
            // Field by field: a copy of the whole `DataResponse` went through its value
            // witnesses (its `Result` holds existentials), ~300 instructions per request.
            parts.append(
                AllocationReturn.Parts(
                    head: completion.response.head, body: completion.response.data, metrics: completion.response.metrics))
        default:
            break
        }
    }

    /// One event for one monitor, on the monitor's queue.
    private func call(_ monitor: any EventMonitor, with event: MonitorEvent, foundation: Bool) {
        switch event {
        case .created(let task): monitor.taskDidCreate(task)
        case .resumed(let task): monitor.taskDidResume(task)
        case .suspended(let task): monitor.taskDidSuspend(task)
        case .cancelled(let task): monitor.taskDidCancel(task)
        case .willSend(let task, let request): monitor.task(task, willSend: request)
        case .redirect(let task, let head, let request):
            guard let response = head.httpURLResponse else { return }
            monitor.task(task, willPerformHTTPRedirection: response, newRequest: request)
        case .received(let task, let head):
            monitor.task(task, didReceiveHead: head)
            if foundation, let response = head.httpURLResponse { monitor.task(task, didReceive: response) }
        case .willRetry(let task, let delay, let error, let head):
            monitor.task(task, willRetryAfter: delay, dueTo: error ?? Self.statusError(head))
        case .waitingForConnectivity(let task):
            monitor.taskIsWaitingForConnectivity(task)
        case .finished(let completion):
            monitor.task(completion.task, didFinishCollecting: completion.metrics)
            monitor.task(completion.task, didCompleteWithError: completion.error)
            monitor.task(completion.task, didProduce: completion.response)
        case .invalidated(let manager):
            guard let manager else { return }
            monitor.managerDidInvalidate(manager, error: nil)
        }
    }

    /// The error a retried response stands for: its status, as the validating serializers say it.
    private static func statusError(_ head: HTTPResponseHead?) -> any Error {
        guard let head, let response = head.httpURLResponse else {
            return SessionError.badServerResponse("the attempt failed without a response")
        }
        return SerializationError.unacceptableStatusCode(head.statusCode, response: response, data: nil)
    }
}

extension TaskMetrics {
    /// The metrics of a task that sent nothing (answered from the cache, or failed before
    /// its first attempt).
    static func empty(now: Date = Date()) -> TaskMetrics {
        TaskMetrics(transactionMetrics: [], taskStart: now, taskDuration: 0, redirectCount: 0)
    }
}
