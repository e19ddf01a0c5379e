import Dispatch

/// The completions one pass of a driver loop produced, sent to their queue in one block when
/// the pass ends.
///
/// With many transfers in flight a pass often finishes several at once; one `async` per
/// completion cost the driver thread a dispatch call, a block copy and often a thread wakeup
/// each. Order is kept: items run in the order they were added, and a change of queue sends
/// what came before first. For serial queues only: on a concurrent queue the items of one
/// block would run one after another. Confinement: the driver thread (owned by `DriverLoop`).
final class CompletionBatch {
    private var queue: DispatchQueue?
    private var items: [@Sendable () -> Void] = []

    /// Queues `work` for `queue`, after every item added before it.
    func add(_ work: @escaping @Sendable () -> Void, on queue: DispatchQueue) {
        if let current = self.queue, current !== queue { flush() }
        self.queue = queue
        items.append(work)
    }

    /// Sends the gathered items to their queue (the end of the pass).
    func flush() {
        guard let queue, !items.isEmpty else { return }
        let work = items
        items = []
        self.queue = nil
        if work.count == 1 {
            queue.async(execute: work[0])
        } else {
            queue.async { for item in work { item() } }
        }
    }
}
