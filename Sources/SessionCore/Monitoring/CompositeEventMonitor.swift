import Dispatch
import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Several monitors as one: each event goes to each of them, on its own queue, in order.
public struct CompositeEventMonitor: EventMonitor {
    /// The monitors, in the order events reach them.
    public let monitors: [any EventMonitor]
    /// A serial queue of the composite's own: events leave it for each monitor's queue in the
    /// order they arrived, so each monitor sees them in order.
    public let queue: DispatchQueue
    /// Each monitor's queue and whether it takes Foundation responses, read once.
    private let targets: [(monitor: any EventMonitor, queue: DispatchQueue, foundation: Bool)]
    /// True when any of the monitors takes Foundation's response in `didReceive`.
    public let receivesFoundationResponses: Bool

    /// A monitor that forwards every event to `monitors`.
    public init(monitors: [any EventMonitor]) {
        self.monitors = monitors
        queue = DispatchQueue(label: "Curlew.CompositeEventMonitor")
        // Each event is a block of its own: on a concurrent queue, blocks in a row ran side by
        // side, out of order. A serial queue per monitor, run on its queue, keeps the order.
        targets = monitors.map { ($0, MonitorHub.serialDelivery(to: $0.queue), $0.receivesFoundationResponses) }
        receivesFoundationResponses = targets.contains { $0.foundation }
    }

    private func forward(_ event: @escaping @Sendable (any EventMonitor) -> Void) {
        for target in targets {
            let monitor = target.monitor
            target.queue.async { event(monitor) }
        }
    }

    /// Forwards to each monitor.
    public func taskDidCreate(_ task: SessionTask) { forward { $0.taskDidCreate(task) } }
    /// Forwards to each monitor.
    public func taskDidResume(_ task: SessionTask) { forward { $0.taskDidResume(task) } }
    /// Forwards to each monitor.
    public func taskDidSuspend(_ task: SessionTask) { forward { $0.taskDidSuspend(task) } }
    /// Forwards to each monitor.
    public func taskDidCancel(_ task: SessionTask) { forward { $0.taskDidCancel(task) } }
    /// Forwards to each monitor.
    public func task(_ task: SessionTask, willSend request: URLRequest) {
        forward { $0.task(task, willSend: request) }
    }
    /// Forwards to each monitor.
    public func task(_ task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest: URLRequest) {
        let response = SendableResponse(response)
        forward { $0.task(task, willPerformHTTPRedirection: response.value, newRequest: newRequest) }
    }
    /// Forwards to each monitor.
    public func task(_ task: SessionTask, didReceive response: HTTPURLResponse) {
        let response = SendableResponse(response)
        for target in targets where target.foundation {
            let monitor = target.monitor
            target.queue.async { monitor.task(task, didReceive: response.value) }
        }
    }
    /// Forwards to each monitor.
    public func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) {
        forward { $0.task(task, didReceiveHead: head) }
    }
    /// Forwards to each monitor.
    public func task(_ task: SessionTask, willRetryAfter delay: TimeInterval, dueTo error: any Error) {
        forward { $0.task(task, willRetryAfter: delay, dueTo: error) }
    }

    /// Forwards to each monitor.
    public func taskIsWaitingForConnectivity(_ task: SessionTask) {
        forward { $0.taskIsWaitingForConnectivity(task) }
    }
    /// Forwards to each monitor.
    public func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
        forward { $0.task(task, didFinishCollecting: metrics) }
    }
    /// Forwards to each monitor.
    public func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) {
        forward { $0.task(task, didCompleteWithError: error) }
    }
    /// Forwards to each monitor.
    public func task(_ task: SessionTask, didProduce response: DataResponse) {
        forward { $0.task(task, didProduce: response) }
    }
    /// Forwards to each monitor.
    public func managerDidInvalidate(_ manager: URLSessionManager, error: (any Error)?) {
        forward { $0.managerDidInvalidate(manager, error: error) }
    }
}

/// An `HTTPURLResponse` handed to another queue.
///
/// `@unchecked Sendable`: Curlew never changes a response after building it, and monitors
/// only read it (Foundation's `HTTPURLResponse` has no mutating API).
struct SendableResponse: @unchecked Sendable {
    let value: HTTPURLResponse
    init(_ value: HTTPURLResponse) { self.value = value }
}
