import Dispatch
import Foundation
import Synchronization

/// Follows one task for one control: calls `active(true)` while the task runs and
/// `active(false)` once it is suspended or completes, on the chosen queue. Kept in a
/// process-wide table keyed by the control's identity, holding the control weakly (the
/// categories' associated objects): binding a new task replaces the old binding, and a
/// binding ends with its task or its control.
final class TaskStateBinding: @unchecked Sendable {
    // @unchecked: `observers` is set once before the binding is published and cleared only
    // in `end()`, which runs once (after its removal from the table, under the table's lock);
    // `control` is a weak reference, whose loads the Swift runtime makes atomic.

    private static let table = Mutex<[ObjectIdentifier: TaskStateBinding]>([:])

    private let key: ObjectIdentifier
    private weak var control: AnyObject?
    private var observers: [any NSObjectProtocol] = []

    private init(control: AnyObject) {
        key = ObjectIdentifier(control)
        self.control = control
    }

    /// Binds `task` to `control` (nil unbinds). `active` receives the control and the state to
    /// show; it is called at once, on `queue`, with the task's current state.
    static func bind(
        _ control: AnyObject, to task: SessionTask?, on queue: DispatchQueue,
        active: @escaping @Sendable (AnyObject, Bool) -> Void
    ) {
        let old = table.withLock { $0.removeValue(forKey: ObjectIdentifier(control)) }
        old?.end()
        purgeReleasedControls()
        guard let task else { return }
        let binding = TaskStateBinding(control: control)
        // Strong: the binding lives in the table until its task or control ends; `end()` then
        // drops the observers and with them these closures.
        let deliver: @Sendable (Bool) -> Void = { isActive in
            queue.async {
                guard let control = binding.control else { return }
                active(control, isActive)
            }
        }
        // Before the observers: this task posts its notifications from now on, whatever its
        // manager's `postsTaskNotifications` says.
        task.isFollowedByBinding.store(true, ordering: .releasing)
        let center = NotificationCenter.default
        binding.observers = [
            center.addObserver(forName: .taskDidResume, object: task, queue: nil) { _ in deliver(true) },
            center.addObserver(forName: .taskDidSuspend, object: task, queue: nil) { _ in deliver(false) },
            center.addObserver(forName: .taskDidComplete, object: task, queue: nil) { _ in
                // Out of the table before the last call is queued: whoever sees `false`
                // never finds the binding still there.
                binding.finish()
                deliver(false)
            },
        ]
        table.withLock { $0[binding.key] = binding }
        // The state now, after the observers: a change in between is reported twice at worst.
        switch task.state {
        case .running: deliver(true)
        case .completed:
            binding.finish()
            deliver(false)
        default: break
        }
    }

    /// Whether `control` has a binding (for tests of the table's lifetime rules).
    static func isBound(_ control: AnyObject) -> Bool {
        table.withLock { $0[ObjectIdentifier(control)] != nil }
    }

    /// Removes this binding from the table (its task completed).
    private func finish() {
        let removed = Self.table.withLock { table -> Bool in
            guard table[key] === self else { return false }
            table[key] = nil
            return true
        }
        if removed { end() }
    }

    /// Stops observing.
    private func end() {
        for observer in observers { NotificationCenter.default.removeObserver(observer) }
        observers = []
    }

    /// Ends bindings whose control was released (its identity may be reused by a new object).
    private static func purgeReleasedControls() {
        let released = table.withLock { table -> [TaskStateBinding] in
            let gone = table.values.filter { $0.control == nil }
            for binding in gone { table[binding.key] = nil }
            return gone
        }
        for binding in released { binding.end() }
    }
}
