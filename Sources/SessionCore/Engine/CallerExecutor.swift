import Dispatch

/// What resuming a Swift task's continuation runs, as far as the driver thread must care.
///
/// Resuming a continuation enqueues its task on the executor it runs on. For a task with no
/// actor isolation and no task executor preference that is the global concurrent executor:
/// Swift's own code, which only queues a job, and the driver thread may do it (it saves a
/// thread hop). Under a task executor preference (`withTaskExecutorPreference`) or on an
/// actor with an executor of its own, the resume calls that executor's `enqueue` — the
/// caller's code, which the driver thread never runs.
enum CallerExecutor {
    /// Whether a continuation the current task makes here resumes through the global
    /// concurrent executor: `isolation` nil (the function making it is nonisolated) and no
    /// task executor preference.
    static func resumesOnGlobalExecutor(isolation: isolated (any Actor)? = #isolation) -> Bool {
        guard isolation == nil else { return false }
        return withUnsafeCurrentTask { task in task.map { $0.unownedTaskExecutor == nil } ?? false }
    }
}

/// A continuation of a Swift task's that the driver thread resumes (a streamed body's waiting
/// reader, a body producer waiting for room): directly when that runs nothing of the
/// caller's, else from a global queue.
struct DriverResumedWaiter<Value: Sendable, Failure: Error>: Sendable {
    let continuation: CheckedContinuation<Value, Failure>
    /// The waiting task resumes on an executor of its caller's (`CallerExecutor`).
    let resumesElsewhere: Bool

    /// Wraps a continuation made by the current task in a nonisolated function.
    init(_ continuation: CheckedContinuation<Value, Failure>) {
        self.continuation = continuation
        resumesElsewhere = !CallerExecutor.resumesOnGlobalExecutor(isolation: nil)
    }

    /// Resumes it from the driver thread — or from a thread that may be it: a body producer is
    /// also released by `AsyncBodyFeed.cancel()`, which the completion queue calls today; the
    /// hop costs only the callers with an executor of their own.
    func resumeFromDriver(with result: Result<Value, Failure>) {
        if resumesElsewhere {
            let continuation = continuation
            DispatchQueue.global().async { continuation.resume(with: result) }
        } else {
            continuation.resume(with: result)
        }
    }
}
