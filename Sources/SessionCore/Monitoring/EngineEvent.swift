import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The events the engine's own observers take (`EngineObservers`): AFNetworking's hook
/// closures and notifications, as observers on the same seam the user's monitors are
/// (`MonitorHub`), at the moments their public contracts name.
///
/// None of them is emitted on the driver thread: the observers run the user's closures
/// inline, on the thread that emits (the caller's, or the completion queue).
enum EngineEvent {
    /// `resume()` took effect (a start or an unpause).
    case resumed(SessionTask)
    /// `suspend()` paused a running task.
    case suspended(SessionTask)
    /// The task's completion handler returned (completion queue): the metrics and
    /// task-completion hooks follow it.
    case handlerReturned(SessionTask, metrics: TaskMetrics?, error: (any Error)?, hooks: SessionEngine.Hooks)
    /// The task left the manager's registry (completion queue): the `.taskDidComplete`
    /// notification, with what its `userInfo` is made of.
    case completed(SessionTask, CompletionFacts)
    /// A finished download's file was moved to its destination, or failed to be (`error`).
    case downloadMoved(SessionTask, error: SessionError?)
}

/// What a completed task's `.taskDidComplete` notification reports (`CompletionUserInfo`).
struct CompletionFacts {
    let body: Data?
    let result: Result<any Sendable, any Error>
    let serializer: any ResponseSerialization
    let serializerRan: Bool
    let metrics: TaskMetrics?
    let fileURL: URL?
}
