import Dispatch
import Foundation
import Synchronization

/// Tells a UI when to show a network activity indicator (AFNetworking's
/// `AFNetworkActivityIndicatorManager`), for any toolkit.
///
/// Counts the tasks of every manager that are running (from the task notifications) plus the
/// activity you report with ``incrementActivityCount()``. The indicator turns on only once
/// activity has lasted ``activationDelay`` (1 s: short requests never flicker it) and off
/// ``completionDelay`` (0.17 s) after the last activity ended, so back-to-back requests keep
/// it on. ``networkActivityActionBlock`` receives each change on ``callbackQueue`` (the main
/// queue by default; choose another for a toolkit with its own run loop).
public final class NetworkActivityIndicatorManager: @unchecked Sendable {
    // @unchecked: every mutable member is in `state`, behind its Mutex.

    private enum Phase { case idle, delayingStart, active, delayingEnd }

    private struct State {
        var isEnabled = false
        var activationDelay: TimeInterval = 1.0
        var completionDelay: TimeInterval = 0.17
        var callbackQueue = DispatchQueue.main
        var action: (@Sendable (Bool) -> Void)?
        var reportedCount = 0
        var runningTasks = Set<ObjectIdentifier>()
        var phase = Phase.idle
        /// Bumped whenever a timer is superseded: a timer fires only for its own generation.
        var generation = 0
        var isVisible = false
    }

    private let state = Mutex(State())
    private var observers: [any NSObjectProtocol] = []  // set once in init, removed in deinit

    /// The manager most apps use.
    public static let shared = NetworkActivityIndicatorManager()

    /// A manager that follows every Curlew task from now on.
    public init() {
        let center = NotificationCenter.default
        observers = [
            center.addObserver(forName: .taskDidResume, object: nil, queue: nil) { [weak self] note in
                guard let task = note.object as? SessionTask, task.state == .running else { return }
                self?.update { $0.runningTasks.insert(ObjectIdentifier(task)).inserted }
            },
            center.addObserver(forName: .taskDidSuspend, object: nil, queue: nil) { [weak self] note in
                guard let task = note.object as? SessionTask else { return }
                self?.update { $0.runningTasks.remove(ObjectIdentifier(task)) != nil }
            },
            center.addObserver(forName: .taskDidComplete, object: nil, queue: nil) { [weak self] note in
                guard let task = note.object as? SessionTask else { return }
                self?.update { $0.runningTasks.remove(ObjectIdentifier(task)) != nil }
            },
        ]
    }

    deinit {
        for observer in observers { NotificationCenter.default.removeObserver(observer) }
        if state.withLock({ $0.isEnabled }) { TaskNotificationDemand.change(by: -1) }
    }

    // MARK: Settings

    /// Whether the indicator is managed at all (default false, as in AFNetworking). Turning it
    /// off hides a visible indicator.
    public var isEnabled: Bool {
        get { state.withLock { $0.isEnabled } }
        set {
            var demand = 0
            update { state in
                // While enabled, every manager posts the task notifications it counts from
                // (`SessionConfiguration.postsTaskNotifications`).
                if state.isEnabled != newValue { demand = newValue ? 1 : -1 }
                state.isEnabled = newValue
                return true
            }
            if demand != 0 { TaskNotificationDemand.change(by: demand) }
        }
    }

    /// How long activity must last before the indicator turns on, in seconds (default 1.0).
    public var activationDelay: TimeInterval {
        get { state.withLock { $0.activationDelay } }
        set { state.withLock { $0.activationDelay = Self.sanitized(newValue) } }
    }

    /// How long the indicator stays on after the last activity ended, in seconds (default 0.17).
    public var completionDelay: TimeInterval {
        get { state.withLock { $0.completionDelay } }
        set { state.withLock { $0.completionDelay = Self.sanitized(newValue) } }
    }

    /// Where ``networkActivityActionBlock`` runs (default: the main queue).
    public var callbackQueue: DispatchQueue {
        get { state.withLock { $0.callbackQueue } }
        set { state.withLock { $0.callbackQueue = newValue } }
    }

    /// Called with `true` when the indicator should show and `false` when it should hide.
    public var networkActivityActionBlock: (@Sendable (Bool) -> Void)? {
        get { state.withLock { $0.action } }
        set { state.withLock { $0.action = newValue } }
    }

    // MARK: Activity

    /// Running tasks plus reported activity.
    public var activityCount: Int { state.withLock { $0.runningTasks.count + $0.reportedCount } }

    /// Whether the indicator is on now (after the delays).
    public var isNetworkActivityIndicatorVisible: Bool { state.withLock { $0.isVisible } }

    /// Reports activity that is not a Curlew task.
    public func incrementActivityCount() {
        update { state in
            state.reportedCount += 1
            return true
        }
    }

    /// Reports the end of activity reported with ``incrementActivityCount()`` (never below 0).
    public func decrementActivityCount() {
        update { state in
            guard state.reportedCount > 0 else { return false }
            state.reportedCount -= 1
            return true
        }
    }

    // MARK: The state machine

    /// A delay of 0 or more seconds; anything else (NaN, negative, infinite) is read as 0 or
    /// the longest wait Dispatch can make.
    private static func sanitized(_ delay: TimeInterval) -> TimeInterval {
        guard !delay.isNaN, delay > 0 else { return 0 }
        return min(delay, 86_400)
    }

    /// Applies `change`; when it changed anything, moves the state machine.
    private func update(_ change: (inout State) -> Bool) {
        var effects: [() -> Void] = []
        state.withLock { state in
            guard change(&state) else { return }
            let busy = state.isEnabled && state.runningTasks.count + state.reportedCount > 0
            switch (state.phase, busy) {
            case (.idle, true):
                state.phase = .delayingStart
                effects.append(schedule(after: state.activationDelay, generation: bump(&state)))
            case (.delayingStart, false):
                state.phase = .idle
                _ = bump(&state)
            case (.active, false):
                state.phase = .delayingEnd
                effects.append(schedule(after: state.completionDelay, generation: bump(&state)))
            case (.delayingEnd, true):
                state.phase = .active
                _ = bump(&state)
            default:
                break
            }
            if !state.isEnabled, state.isVisible {
                state.isVisible = false
                state.phase = .idle
                effects.append(announce(false, state))
            }
        }
        for effect in effects { effect() }
    }

    private func bump(_ state: inout State) -> Int {
        state.generation += 1
        return state.generation
    }

    /// A timer for `generation` (the manager is kept until it fires: at most one delay).
    private func schedule(after delay: TimeInterval, generation: Int) -> () -> Void {
        { DispatchQueue.global().asyncAfter(deadline: .now() + delay) { self.timerFired(generation) } }
    }

    private func timerFired(_ generation: Int) {
        var effect: (() -> Void)?
        state.withLock { state in
            guard state.generation == generation else { return }
            switch state.phase {
            case .delayingStart:
                state.phase = .active
                state.isVisible = true
                effect = announce(true, state)
            case .delayingEnd:
                state.phase = .idle
                state.isVisible = false
                effect = announce(false, state)
            default:
                break
            }
        }
        effect?()
    }

    private func announce(_ visible: Bool, _ state: State) -> () -> Void {
        let (queue, action) = (state.callbackQueue, state.action)
        return { if let action { queue.async { action(visible) } } }
    }
}
