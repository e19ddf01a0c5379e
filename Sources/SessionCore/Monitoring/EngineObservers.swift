import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The engine's own observers on the event seam: the AFNetworking-style hook closures and
/// the `NotificationCenter` notifications, which the manager always has (the user's monitors
/// come on top, through `MonitorHub`, only when given).
///
/// They run inline on the emitting thread, not on a queue of their own: their public
/// contracts name the queue and the order (a hook "on `completionQueue` after each task's
/// completion handler"), and an extra hop per event would cost every request.
enum EngineObservers {
    /// Hands `event`, emitted by `engine` (`SessionEngine.emit`), to the hooks and
    /// notifications that observe it.
    static func observe(_ event: EngineEvent, engine: SessionEngine) {
        switch event {
        case .resumed(let task):
            post(.taskDidResume, for: task, on: engine.completionQueue)
        case .suspended(let task):
            post(.taskDidSuspend, for: task, on: engine.completionQueue)
        case .handlerReturned(let task, let metrics, let error, let hooks):
            hooks.metrics?(task, metrics)
            hooks.taskDidComplete?(task, error)
        case .completed(let task, let facts):
            let userInfo = CompletionUserInfo.make(
                body: facts.body, result: facts.result, serializer: facts.serializer,
                serializerRan: facts.serializerRan, metrics: facts.metrics, fileURL: facts.fileURL)
            NotificationCenter.default.post(name: .taskDidComplete, object: task, userInfo: userInfo)
        case .downloadMoved(let task, nil):
            NotificationCenter.default.post(name: .downloadTaskDidMoveFileSuccessfully, object: task)
        case .downloadMoved(let task, let error?):
            NotificationCenter.default.post(
                name: .downloadTaskDidFailToMoveFile, object: task, userInfo: [NotificationKeys.error: error])
        }
    }

    /// Posts a task's state notification on the completion queue (never on the caller's
    /// thread, which may hold locks).
    private static func post(_ name: Notification.Name, for task: SessionTask, on queue: DispatchQueue) {
        queue.async {
            NotificationCenter.default.post(name: name, object: task)
        }
    }
}
