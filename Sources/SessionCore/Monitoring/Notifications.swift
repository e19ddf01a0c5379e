import Foundation

extension Notification.Name {
    /// Posted (object: the task) on the completion queue when a task is resumed.
    public static let taskDidResume = Notification.Name("Curlew.taskDidResume")
    /// Posted (object: the task) on the completion queue when a task is suspended.
    public static let taskDidSuspend = Notification.Name("Curlew.taskDidSuspend")
    /// Posted (object: the task) after its completion handler returned; `userInfo` holds the
    /// `SessionNotificationKey` entries that apply.
    public static let taskDidComplete = Notification.Name("Curlew.taskDidComplete")
    /// Posted (object: the manager) once a manager has been invalidated.
    public static let sessionDidInvalidate = Notification.Name("Curlew.sessionDidInvalidate")
    /// Posted (object: the task) when a download was moved to its destination, on the
    /// manager's `operationQueue` where the file is moved, before the completion handler.
    public static let downloadTaskDidMoveFileSuccessfully = Notification.Name("Curlew.downloadTaskDidMoveFileSuccessfully")
    /// Posted (object: the task) when a download could not be moved to its destination.
    public static let downloadTaskDidFailToMoveFile = Notification.Name("Curlew.downloadTaskDidFailToMoveFile")
}

/// Keys of the `userInfo` of `.taskDidComplete`.
public enum SessionNotificationKey {
    /// The raw response body (`Data`).
    public static let responseData = "Curlew.responseData"
    /// The serialized response value.
    public static let serializedResponse = "Curlew.serializedResponse"
    /// The response serializer that produced it.
    public static let responseSerializer = "Curlew.responseSerializer"
    /// A download's file URL.
    public static let assetPath = "Curlew.assetPath"
    /// The error the task failed with.
    public static let error = "Curlew.error"
    /// The task's `TaskMetrics`.
    public static let metrics = "Curlew.metrics"
}

/// The `userInfo` keys, boxed once: a task's completion notification then costs no key
/// allocations and no copy of a key set.
enum NotificationKeys {
    // `nonisolated(unsafe)`: AnyHashable is not marked Sendable, but each key only wraps an
    // immutable String and is never mutated after its lazy initialisation.
    nonisolated(unsafe) static let responseData = AnyHashable(SessionNotificationKey.responseData)
    nonisolated(unsafe) static let serializedResponse = AnyHashable(SessionNotificationKey.serializedResponse)
    nonisolated(unsafe) static let responseSerializer = AnyHashable(SessionNotificationKey.responseSerializer)
    nonisolated(unsafe) static let error = AnyHashable(SessionNotificationKey.error)
    nonisolated(unsafe) static let metrics = AnyHashable(SessionNotificationKey.metrics)
    nonisolated(unsafe) static let assetPath = AnyHashable(SessionNotificationKey.assetPath)
}
