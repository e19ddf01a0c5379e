import Dispatch
import Foundation
import Serialization
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// An `EventMonitor` that writes down every event as a short line, per task, with where it ran.
final class RecordingMonitor: EventMonitor {
    struct Entry: Sendable {
        let task: Int?
        let line: String
        /// Not the driver thread, and on this monitor's own queue.
        let placedRight: Bool
    }

    let queue: DispatchQueue
    private let key = DispatchSpecificKey<Bool>()
    private let entries = Mutex<[Entry]>([])
    /// Called (on the monitor's queue) after each event is recorded.
    private let onEvent: (@Sendable (Entry) -> Void)?

    /// Whether Foundation's response is wanted (`didReceive`); false records `head` lines.
    let receivesFoundationResponses: Bool

    /// `concurrent`: the monitor's queue runs its blocks side by side (a monitor may give one).
    init(
        label: String = "test.recording-monitor", foundationResponses: Bool = true, concurrent: Bool = false,
        onEvent: (@Sendable (Entry) -> Void)? = nil
    ) {
        receivesFoundationResponses = foundationResponses
        queue = concurrent ? DispatchQueue(label: label, attributes: .concurrent) : DispatchQueue(label: label)
        queue.setSpecific(key: key, value: true)
        self.onEvent = onEvent
    }

    /// The lines recorded for `task`, in order.
    func lines(for task: SessionTask) -> [String] {
        entries.withLock { $0.filter { $0.task == task.taskIdentifier }.map(\.line) }
    }

    var allEntries: [Entry] { entries.withLock { $0 } }

    private func record(_ task: SessionTask?, _ line: String) {
        let name = currentThreadName()
        let entry = Entry(
            task: task?.taskIdentifier, line: line,
            placedRight: !name.hasPrefix("curlew.drv") && DispatchQueue.getSpecific(key: key) == true)
        entries.withLock { $0.append(entry) }
        onEvent?(entry)
    }

    private static func name(of error: (any Error)?) -> String {
        guard let error else { return "ok" }
        if case .cancelled? = error as? SessionError { return "cancelled" }
        return caseName(of: error)
    }

    private static func path(_ url: URL?) -> String { url?.path ?? "-" }

    func taskDidCreate(_ task: SessionTask) { record(task, "create") }
    func taskDidResume(_ task: SessionTask) { record(task, "resume") }
    func taskDidSuspend(_ task: SessionTask) { record(task, "suspend") }
    func taskDidCancel(_ task: SessionTask) { record(task, "cancel") }
    func task(_ task: SessionTask, willSend request: URLRequest) {
        record(task, "send \(request.httpMethod ?? "GET") \(Self.path(request.url))")
    }
    func task(_ task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest: URLRequest) {
        record(task, "redirect \(response.statusCode) \(Self.path(newRequest.url))")
    }
    func task(_ task: SessionTask, didReceive response: HTTPURLResponse) { record(task, "receive \(response.statusCode)") }
    func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) {
        // Recorded only for monitors that take the head instead, so the usual sequences stay.
        if !receivesFoundationResponses { record(task, "head \(head.statusCode) \(head.fieldCount) fields") }
    }
    func task(_ task: SessionTask, willRetryAfter delay: TimeInterval, dueTo error: any Error) {
        record(task, "retry")
    }
    func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
        record(task, "metrics \(metrics.transactionMetrics.count)")
    }
    func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) {
        record(task, "complete \(Self.name(of: error))")
    }
    func task(_ task: SessionTask, didProduce response: DataResponse) {
        record(task, "produce \(Self.name(of: response.error))")
    }
    func managerDidInvalidate(_ manager: URLSessionManager, error: (any Error)?) { record(nil, "invalidate") }
}

/// The calling thread's name: Foundation's, else the kernel's, read from
/// `/proc/thread-self/comm` with read(2) (the driver's `Thread.name` sets it once the thread
/// runs; Foundation's file APIs read /proc files as empty).
func currentThreadName() -> String {
    if let name = Thread.current.name, !name.isEmpty { return name }
    let file = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
    guard file >= 0 else { return "" }
    defer { close(file) }
    var buffer = [UInt8](repeating: 0, count: 64)
    let count = read(file, &buffer, buffer.count)
    guard count > 0 else { return "" }
    return String(decoding: buffer.prefix(count), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}
