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
    case finished(SessionTask, TaskMetrics, SessionError?, DataResponse)
    case invalidated
}

/// Hands a manager's events to its monitors (`URLSessionManager.eventMonitors`).
///
/// Events come from several threads — the caller's (create, resume, suspend, cancel), the
/// driver's (each attempt, redirects, response heads, retries), the completion queue — each
/// in the order its causes happened. They are appended to one list under a lock and drained
/// by one serial queue of the hub's own, which forwards them to every monitor's queue in
/// batches: each monitor sees one task's events in order, the driver only appends to a list
/// (one `async` call when the list was empty), and under load one dispatch carries many
/// events instead of two dispatches per event. The engine has a hub only when monitors were
/// given, so without them the request path checks one `let`.
final class MonitorHub: Sendable {
    private struct Target: Sendable {
        let monitor: any EventMonitor
        let queue: DispatchQueue
        let receivesFoundationResponses: Bool
    }

    /// The monitors given at init, in order.
    let monitors: [any EventMonitor]
    private let targets: [Target]
    private let queue: DispatchQueue
    /// Whether any monitor takes Foundation's `HTTPURLResponse` in `didReceive`.
    private let buildsResponses: Bool
    /// Events not yet drained; a drain is scheduled whenever this goes from empty to not.
    private let pending = Mutex<[MonitorEvent]>([])
    /// The manager, for `managerDidInvalidate` (weak: the engine must not keep it alive).
    private let owner = Mutex<WeakManager>(WeakManager())

    private struct WeakManager {
        weak var manager: URLSessionManager?
    }

    /// nil when `monitors` is empty: then nothing is dispatched at all.
    init?(monitors: [any EventMonitor], identifier: Int) {
        guard !monitors.isEmpty else { return nil }
        self.monitors = monitors
        targets = monitors.map {
            Target(monitor: $0, queue: $0.queue, receivesFoundationResponses: $0.receivesFoundationResponses)
        }
        buildsResponses = targets.contains { $0.receivesFoundationResponses }
        queue = DispatchQueue(label: "Curlew.monitors.\(identifier)")
    }

    func attach(to manager: URLSessionManager) {
        owner.withLock { $0.manager = manager }
    }

    /// Queues `event` for every monitor; returns at once.
    func emit(_ event: MonitorEvent) {
        let schedules = pending.withLock { events -> Bool in
            events.append(event)
            return events.count == 1
        }
        if schedules { queue.async { [self] in drain() } }
    }

    /// Forwards everything queued so far, one block per monitor (on the hub's queue).
    private func drain() {
        let events = pending.withLock { events -> [MonitorEvent] in
            defer { events.removeAll(keepingCapacity: true) }
            return events
        }
        var calls: [MonitorCall] = []
        calls.reserveCapacity(events.count)
        for event in events {
            if let call = makeCall(for: event) { calls.append(call) }
        }
        guard !calls.isEmpty else { return }
        let batch = calls
        for target in targets {
            let monitor = target.monitor
            let foundation = target.receivesFoundationResponses
            target.queue.async {
                for call in batch { call(monitor, foundation) }
            }
        }
    }

    /// One event for one monitor: the monitor, and whether it takes Foundation responses.
    private typealias MonitorCall = @Sendable (any EventMonitor, Bool) -> Void

    /// What each monitor is called with (on the hub's queue: Foundation values are built here,
    /// once, not on the driver thread, and only when some monitor takes them).
    private func makeCall(for event: MonitorEvent) -> MonitorCall? {
        switch event {
        case .created(let task): return { monitor, _ in monitor.taskDidCreate(task) }
        case .resumed(let task): return { monitor, _ in monitor.taskDidResume(task) }
        case .suspended(let task): return { monitor, _ in monitor.taskDidSuspend(task) }
        case .cancelled(let task): return { monitor, _ in monitor.taskDidCancel(task) }
        case .willSend(let task, let request): return { monitor, _ in monitor.task(task, willSend: request) }
        case .redirect(let task, let head, let request):
            guard let built = head.httpURLResponse else { return nil }
            let response = SendableResponse(built)
            return { monitor, _ in monitor.task(task, willPerformHTTPRedirection: response.value, newRequest: request) }
        case .received(let task, let head):
            let response = buildsResponses ? head.httpURLResponse.map(SendableResponse.init) : nil
            return { monitor, foundation in
                monitor.task(task, didReceiveHead: head)
                if foundation, let response { monitor.task(task, didReceive: response.value) }
            }
        case .willRetry(let task, let delay, let error, let head):
            let reason: any Error = error ?? Self.statusError(head)
            return { monitor, _ in monitor.task(task, willRetryAfter: delay, dueTo: reason) }
        case .waitingForConnectivity(let task):
            return { monitor, _ in monitor.taskIsWaitingForConnectivity(task) }
        case .finished(let task, let metrics, let error, let response):
            return { monitor, _ in
                monitor.task(task, didFinishCollecting: metrics)
                monitor.task(task, didCompleteWithError: error)
                monitor.task(task, didProduce: response)
            }
        case .invalidated:
            guard let manager = owner.withLock({ $0.manager }) else { return nil }
            return { monitor, _ in monitor.managerDidInvalidate(manager, error: nil) }
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
