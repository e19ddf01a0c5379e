import Dispatch
import Foundation
import Synchronization

/// The published side of a manager: current status and path, the change block, the
/// `statusUpdates` subscribers. The monitor thread publishes into it; user code is called
/// on `queue`, one change at a time and in order.
///
/// It is separate from the manager so the monitor never holds the manager: the manager's
/// deinit (which stops the monitor) can therefore never run on the monitor thread.
final class ReachabilityStore: Sendable {
    struct State {
        var status: NetworkReachabilityStatus = .unknown
        var path: NetworkPath?
        var block: (@Sendable (NetworkReachabilityStatus) -> Void)?
        var continuations: [Int: AsyncStream<NetworkReachabilityStatus>.Continuation] = [:]
        var nextContinuationID = 0
        /// Bumped on every start and stop; a monitor publishes only with the current value,
        /// so a stopped monitor's last evaluation can never overwrite a newer one.
        var generation: UInt64 = 0
        /// The notification's object. Weak so the store does not keep its manager alive.
        weak var owner: NetworkReachabilityManager?
    }

    let state = Mutex(State())
    /// Held by `publish` around its whole change, so that concurrent publishes reach the
    /// listeners in order. Not `state`: a yield resumes the awaiting Swift task, which takes
    /// that task's status lock, and a cancel of the task runs `onTermination` (which takes
    /// `state`) under that same status lock. Yielding under `state` deadlocked the two.
    private let publishing = Mutex(())
    /// Serial queue on which change blocks run and notifications are posted.
    let queue = DispatchQueue(label: "Curlew.Reachability.callbacks")

    /// Starts a new generation and returns it.
    func nextGeneration() -> UInt64 {
        state.withLock { state in
            state.generation &+= 1
            return state.generation
        }
    }

    /// Records `path`; when its status differs from the current one, tells every listener
    /// exactly once.
    func publish(_ path: NetworkPath, generation: UInt64) {
        publishing.withLock { _ in
            let change = state.withLock { state -> (NetworkReachabilityStatus, [AsyncStream<NetworkReachabilityStatus>.Continuation], (@Sendable (NetworkReachabilityStatus) -> Void)?)? in
                guard state.generation == generation else { return nil }
                state.path = path
                guard state.status != path.status else { return nil }
                state.status = path.status
                return (path.status, Array(state.continuations.values), state.block)
            }
            guard let (status, continuations, block) = change else { return }
            for continuation in continuations { continuation.yield(status) }
            queue.async { [self] in
                block?(status)
                let owner = self.state.withLock { $0.owner }
                guard let owner else { return }
                NotificationCenter.default.post(
                    name: .networkReachabilityDidChange, object: owner,
                    userInfo: [NetworkReachabilityManager.statusUserInfoKey: status,
                               NetworkReachabilityManager.pathUserInfoKey: path])
            }
        }
    }

    /// A new subscriber stream that starts with the current status when it is known.
    func makeStream() -> AsyncStream<NetworkReachabilityStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: NetworkReachabilityStatus.self,
                                                             bufferingPolicy: .bufferingNewest(64))
        let id = state.withLock { state in
            let id = state.nextContinuationID
            state.nextContinuationID += 1
            state.continuations[id] = continuation
            // Under `state` so that no publish overtakes it; nobody awaits the new stream
            // yet, so this yield resumes no task (see `publishing`).
            if state.status != .unknown { continuation.yield(state.status) }
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Ends every subscriber stream (the manager is going away).
    func finishStreams() {
        let continuations = state.withLock { state in
            defer { state.continuations.removeAll() }
            return Array(state.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
