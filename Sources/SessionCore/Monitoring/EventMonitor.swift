import Dispatch
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Observes what a manager's tasks do, from creation to the serialized response (Alamofire's
/// `EventMonitor`, OkHttp's `EventListener`).
///
/// Give monitors to the manager when you make it
/// (`URLSessionManager(configuration:eventMonitors:)`). Each method runs on the monitor's
/// ``queue``, never on the thread that drives libcurl, and a monitor sees each event exactly
/// once per occurrence, in the order it happened. For one task the order is:
/// `taskDidCreate`, `taskDidResume`, then for each attempt `willSend` followed by
/// `willPerformHTTPRedirection` or `didReceive`; `willRetryAfter` comes before a retry's
/// `willSend`; then `didFinishCollecting`, `didCompleteWithError` and `didProduce`. A cancelled
/// task sees `taskDidCancel` before `didCompleteWithError`.
///
/// Events reach a monitor in batches, one block on its queue carrying everything that
/// happened in about 5 milliseconds: a monitor hears of an event up to 5 ms after it (it
/// observes; it does not steer), and one request at a time costs it one wake-up of its queue
/// per 5 ms instead of five per request.
///
/// Every method has an empty default, so a monitor implements only what it needs. A monitor
/// that is slow (or blocks its queue) holds up only its own events: transfers go on.
public protocol EventMonitor: Sendable {
    /// The queue this monitor's methods run on (default: a serial queue of Curlew's for the
    /// monitor's type). Read once, when the manager is made.
    var queue: DispatchQueue { get }
    /// Whether ``task(_:didReceive:)`` is called with Foundation's `HTTPURLResponse`
    /// (default: true). On Linux that object costs about as much CPU to build as the rest of
    /// a small request (its initialiser canonicalises every field name), so a monitor that
    /// does not read it — one that implements ``task(_:didReceiveHead:)`` instead, or neither —
    /// returns false, and Curlew builds nothing for it. Read once, when the manager is made.
    var receivesFoundationResponses: Bool { get }
    /// The task was made (it has not started yet).
    func taskDidCreate(_ task: SessionTask)
    /// `resume()` started the task, or continued it after `suspend()`.
    func taskDidResume(_ task: SessionTask)
    /// `suspend()` paused the running task.
    func taskDidSuspend(_ task: SessionTask)
    /// `cancel()` (or the manager's invalidation) cancelled the task; its completion follows.
    func taskDidCancel(_ task: SessionTask)
    /// Each attempt, as it goes out: after adapters, redirects and retries (a redirect or retry is a new attempt).
    func task(_ task: SessionTask, willSend request: URLRequest)
    /// The task's response head arrived (or was answered from the response cache), as Curlew
    /// parsed it: status, version, reason phrase and the fields in arrival order with repeated
    /// fields apart. Called for every monitor, before ``task(_:didReceive:)``; cheap, since
    /// nothing is built for it.
    func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead)
    /// A redirect is about to be followed with `newRequest` (after the redirection hook, if any).
    func task(_ task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest: URLRequest)
    /// The task's response head arrived (or was answered from the response cache).
    func task(_ task: SessionTask, didReceive response: HTTPURLResponse)
    /// The request retrier asked for another attempt after `delay` seconds because of `error`
    /// (a transport error, or `SerializationError.unacceptableStatusCode` for a status of 400 or more).
    func task(_ task: SessionTask, willRetryAfter delay: TimeInterval, dueTo error: any Error)
    /// An attempt failed for want of a route to the host and the task now waits for one
    /// (`SessionConfiguration.waitsForConnectivity`), up to its resource timeout. When a route
    /// appears the request is sent again (a new `willSend`).
    func taskIsWaitingForConnectivity(_ task: SessionTask)
    /// The task's metrics are final (no transaction for a task that sent nothing, such as
    /// one answered from the response cache).
    func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics)
    /// The task completed; `error` is the transfer's failure (a serializer's failure is in
    /// `didProduce`'s result).
    func task(_ task: SessionTask, didCompleteWithError error: (any Error)?)
    /// After the response serializer ran (data tasks; downloads once the file is at its destination).
    /// Also for a failed or cancelled task, with the failure as the result.
    func task(_ task: SessionTask, didProduce response: DataResponse)
    /// The manager finished invalidating (`invalidateSessionCancelingTasks(_:resetSession:)`,
    /// `waitUntilInvalidated()`). Not called for a manager released without invalidation.
    func managerDidInvalidate(_ manager: URLSessionManager, error: (any Error)?)
}

extension EventMonitor {
    /// A serial queue of Curlew's, one per monitor type.
    public var queue: DispatchQueue { EventMonitorQueues.queue(for: Self.self) }
    /// True: ``task(_:didReceive:)`` is called with Foundation's response.
    public var receivesFoundationResponses: Bool { true }
    /// Does nothing.
    public func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) {}
    /// Does nothing.
    public func taskDidCreate(_ task: SessionTask) {}
    /// Does nothing.
    public func taskDidResume(_ task: SessionTask) {}
    /// Does nothing.
    public func taskDidSuspend(_ task: SessionTask) {}
    /// Does nothing.
    public func taskDidCancel(_ task: SessionTask) {}
    /// Does nothing.
    public func task(_ task: SessionTask, willSend request: URLRequest) {}
    /// Does nothing.
    public func task(_ task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest: URLRequest) {}
    /// Does nothing.
    public func task(_ task: SessionTask, didReceive response: HTTPURLResponse) {}
    /// Does nothing.
    public func task(_ task: SessionTask, willRetryAfter delay: TimeInterval, dueTo error: any Error) {}
    /// Does nothing.
    public func taskIsWaitingForConnectivity(_ task: SessionTask) {}
    /// Does nothing.
    public func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) {}
    /// Does nothing.
    public func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) {}
    /// Does nothing.
    public func task(_ task: SessionTask, didProduce response: DataResponse) {}
    /// Does nothing.
    public func managerDidInvalidate(_ manager: URLSessionManager, error: (any Error)?) {}
}

/// The default queues of monitors that do not name one: one serial queue per monitor type.
enum EventMonitorQueues {
    private static let queues = Mutex<[ObjectIdentifier: DispatchQueue]>([:])

    static func queue(for type: Any.Type) -> DispatchQueue {
        queues.withLock { queues in
            if let queue = queues[ObjectIdentifier(type)] { return queue }
            let queue = DispatchQueue(label: "Curlew.EventMonitor.\(type)")
            queues[ObjectIdentifier(type)] = queue
            return queue
        }
    }
}
