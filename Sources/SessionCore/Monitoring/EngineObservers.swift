import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The engine's own observers on the event seam: the AFNetworking-style hook closures and
/// the `NotificationCenter` notifications, which every manager has (the user's monitors come
/// on top, through `MonitorHub`, only when given).
///
/// One method per event, as `EventMonitor` has, called at the moments the public contracts
/// name, inline on the emitting thread (the caller's, the operation queue or the completion
/// queue; never the driver's): a hook runs "on `completionQueue` after each task's
/// completion handler", and an extra hop per event would cost every request. (Callgrind put
/// a first version, one enum of events with payloads, at ~1.7k more instructions per request
/// on the completion queue, in copying and destroying the payloads.)
enum EngineObservers {
    /// `resume()` took effect (a start or an unpause), or `suspend()` paused a running task:
    /// queues `.taskDidResume` or `.taskDidSuspend` (`name`), under the task's lock and before
    /// the work it announces, so that racing calls are posted in the order they took effect.
    /// Returns false for a download, whose notice `postStateNow` posts instead, after the
    /// lock.
    static func queueStateNotice(_ name: Notification.Name, for task: SessionTask, engine: SessionEngine) -> Bool {
        guard postsNotifications(of: task, engine: engine) else { return true }  // nothing to post
        guard task is DownloadTask else {
            engine.stateNotices.add(name, for: task)
            return true
        }
        return false
    }

    /// Whether `task`'s `taskDidResume`, `taskDidSuspend` and `taskDidComplete` are posted:
    /// the configuration says so (`postsTaskNotifications`), or one of Curlew's own observers
    /// listens (an enabled activity indicator, a control bound to this task).
    static func postsNotifications(of task: SessionTask, engine: SessionEngine) -> Bool {
        engine.configuration.postsTaskNotifications || TaskNotificationDemand.isWanted
            || task.isFollowedByBinding.load(ordering: .acquiring)
    }

    /// Posts a download's state notice on the completion queue now (never on the caller's
    /// thread, which may hold locks): it must precede the
    /// `downloadTaskDidMoveFileSuccessfully` its operation queue posts, which a notice waiting
    /// for the completion (`StateNotices`) would not. Called outside the task's lock (reading
    /// the queue takes the engine's).
    static func postStateNow(_ name: Notification.Name, for task: SessionTask, engine: SessionEngine) {
        engine.completionQueue.async {
            NotificationCenter.default.post(name: name, object: task)
        }
    }

    /// The task's completion handler returned (completion queue): the metrics hook, then the
    /// task-completion hook.
    static func taskHandlerDidReturn(
        _ task: SessionTask, metrics: TaskMetrics?, error: (any Error)?, hooks: SessionEngine.Hooks
    ) {
        hooks.metrics?(task, metrics)
        hooks.taskDidComplete?(task, error)
    }

    /// The task left the manager's registry (completion queue): `.taskDidComplete`, with the
    /// `userInfo` its keys describe (`CompletionUserInfo`).
    static func taskDidComplete(
        _ task: SessionTask, body: Data?, result: Result<any Sendable, any Error>,
        serializer: any ResponseSerialization, serializerRan: Bool, metrics: TaskMetrics?, fileURL: URL?
    ) {
        let userInfo = CompletionUserInfo.make(
            body: body, result: result, serializer: serializer, serializerRan: serializerRan,
            metrics: metrics, fileURL: fileURL)
        NotificationCenter.default.post(name: .taskDidComplete, object: task, userInfo: userInfo)
    }

    /// A finished download's file was moved to its destination (operation queue), or could
    /// not be (`error`).
    static func downloadDidMoveFile(_ task: SessionTask, error: SessionError?) {
        if let error {
            NotificationCenter.default.post(
                name: .downloadTaskDidFailToMoveFile, object: task, userInfo: [NotificationKeys.error: error])
        } else {
            NotificationCenter.default.post(name: .downloadTaskDidMoveFileSuccessfully, object: task)
        }
    }

}
