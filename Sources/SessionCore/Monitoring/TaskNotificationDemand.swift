import Synchronization

/// How many of Curlew's own process-wide observers need the task notifications of every
/// manager: enabled ``NetworkActivityIndicatorManager``s. While one is, managers whose
/// configuration turned the notifications off (`SessionConfiguration.postsTaskNotifications`)
/// post them anyway, so the indicator still counts their tasks. (A control bound to one task
/// asks for that task's alone: `SessionTask.isFollowedByBinding`.)
enum TaskNotificationDemand {
    private static let listeners = Atomic<Int>(0)

    /// Whether any such observer listens now.
    static var isWanted: Bool { listeners.load(ordering: .acquiring) > 0 }

    /// An observer started (`+1`) or stopped (`-1`) listening.
    static func change(by delta: Int) {
        listeners.add(delta, ordering: .acquiringAndReleasing)
    }
}
