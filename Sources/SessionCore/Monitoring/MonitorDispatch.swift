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
/// in the order its causes happened. They all pass through one serial queue of the hub's own,
/// which forwards each to every monitor's queue: each monitor sees one task's events in
/// order, and the driver only ever makes one `async` call per event. The engine has a hub
/// only when monitors were given, so without them the request path checks one `let`.
final class MonitorHub: Sendable {
    private struct Target: Sendable {
        let monitor: any EventMonitor
        let queue: DispatchQueue
    }

    /// The monitors given at init, in order.
    let monitors: [any EventMonitor]
    private let targets: [Target]
    private let queue: DispatchQueue
    /// The manager, for `managerDidInvalidate` (weak: the engine must not keep it alive).
    private let owner = Mutex<WeakManager>(WeakManager())

    private struct WeakManager {
        weak var manager: URLSessionManager?
    }

    /// nil when `monitors` is empty: then nothing is dispatched at all.
    init?(monitors: [any EventMonitor], identifier: Int) {
        guard !monitors.isEmpty else { return nil }
        self.monitors = monitors
        targets = monitors.map { Target(monitor: $0, queue: $0.queue) }
        queue = DispatchQueue(label: "Curlew.monitors.\(identifier)")
    }

    func attach(to manager: URLSessionManager) {
        owner.withLock { $0.manager = manager }
    }

    /// Queues `event` for every monitor; returns at once.
    func emit(_ event: MonitorEvent) {
        queue.async { [self] in
            guard let call = makeCall(for: event) else { return }
            for target in targets {
                let monitor = target.monitor
                target.queue.async { call(monitor) }
            }
        }
    }

    /// What each monitor is called with (on the hub's queue: Foundation values are built here,
    /// once, not on the driver thread).
    private func makeCall(for event: MonitorEvent) -> (@Sendable (any EventMonitor) -> Void)? {
        switch event {
        case .created(let task): return { $0.taskDidCreate(task) }
        case .resumed(let task): return { $0.taskDidResume(task) }
        case .suspended(let task): return { $0.taskDidSuspend(task) }
        case .cancelled(let task): return { $0.taskDidCancel(task) }
        case .willSend(let task, let request): return { $0.task(task, willSend: request) }
        case .redirect(let task, let head, let request):
            guard let built = head.httpURLResponse else { return nil }
            let response = SendableResponse(built)
            return { $0.task(task, willPerformHTTPRedirection: response.value, newRequest: request) }
        case .received(let task, let head):
            guard let built = head.httpURLResponse else { return nil }
            let response = SendableResponse(built)
            return { $0.task(task, didReceive: response.value) }
        case .willRetry(let task, let delay, let error, let head):
            let reason: any Error = error ?? Self.statusError(head)
            return { $0.task(task, willRetryAfter: delay, dueTo: reason) }
        case .waitingForConnectivity(let task):
            return { $0.taskIsWaitingForConnectivity(task) }
        case .finished(let task, let metrics, let error, let response):
            return {
                $0.task(task, didFinishCollecting: metrics)
                $0.task(task, didCompleteWithError: error)
                $0.task(task, didProduce: response)
            }
        case .invalidated:
            guard let manager = owner.withLock({ $0.manager }) else { return nil }
            return { $0.managerDidInvalidate(manager, error: nil) }
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
