import Dispatch

/// The completions one pass of a driver loop produced, sent to their queue in one block when
/// the pass ends.
///
/// With many transfers in flight a pass often finishes several at once; one `async` per
/// completion cost the driver thread a dispatch call, a block copy and often a thread wakeup
/// each. Order is kept: items run in the order they were added, and a change of queue sends
/// what came before first. For serial queues only: on a concurrent queue the items of one
/// block would run one after another. Confinement: the driver thread (owned by `DriverLoop`).
///
/// Items are values handed to one `deliver` function given at init, not a closure each: a
/// closure per completion was an allocation on the driver thread freed on the completion
/// queue, and the manager's hooks and serializer it captured were retained on one thread and
/// released on the other at every request. Memory the driver thread allocates and another
/// thread frees makes the two contend for glibc's arena locks (at 64 in flight 1.2–2.5
/// `futex` calls per request, 93% of them glibc's internal locks; 8.2 such allocations per
/// request before this, 6.2 after: the head, its storage, the body, the metrics, the
/// outcome), so each one kept on its own side counts. The head, its storage, a small body and
/// the metrics now go back to the driver after delivery (`delivered`, `AllocationReturn`).
final class CompletionBatch<Item: Sendable> {
    private let deliver: @Sendable (Item) -> Void
    /// Called on the queue with the items of a block once all of them were delivered.
    private let delivered: (@Sendable (UnsafeBufferPointer<Item>) -> Void)?
    private var queue: DispatchQueue?
    // The driver thread only, one access at a time: no dynamic exclusivity check (see
    // DriverLoop.delegates).
    @exclusivity(unchecked) private var items: [Item] = []
    /// References carried to the queue with the items, so that what they keep alive is freed
    /// there (`retire`).
    @exclusivity(unchecked) private var retired: [any Sendable & AnyObject] = []

    /// Whether `queue` is the main queue (its objects are then freed here, not there).
    private var queueIsMain = false
    /// Whether a completion of this pass already resumed its caller from here
    /// (`claimDirectResume`).
    @exclusivity(unchecked) private var resumedDirectly = false

    /// A batch whose items are handed to `deliver`, one call each, on their queue, and then
    /// all of a block's items to `delivered` (the driver takes back what it allocated for them:
    /// `AllocationReturn`).
    init(
        deliver: @escaping @Sendable (Item) -> Void,
        delivered: (@Sendable (UnsafeBufferPointer<Item>) -> Void)? = nil
    ) {
        self.deliver = deliver
        self.delivered = delivered
    }

    /// Queues `item` for `queue` (a serial one: `kind` is `.own` or `.main`), after every
    /// item added before it.
    func add(_ item: Item, on queue: DispatchQueue, kind: CompletionQueueKind) {
        if let current = self.queue, current !== queue { flush() }
        self.queue = queue
        queueIsMain = kind == .main
        items.append(item)
    }

    /// Keeps a reference to `object` until the pass's items have run on their queue. When the
    /// driver thread then drops its own references, the object (a finished request's prepared
    /// form: its URL, strings, header lines and libcurl URL handle) is freed with the block,
    /// normally on that queue, off the thread every transfer shares (a block that has run
    /// before `async` returned to the driver is freed by the driver's release of it). Only for objects that may be freed on any thread:
    /// never one that owns a curl easy or multi handle. Without items, or when they go to the
    /// main queue, the references are dropped at the end of the pass, on the driver thread.
    func retire(_ object: any Sendable & AnyObject) {
        retired.append(object)
    }

    /// Whether a completion may resume its caller from the driver thread in this pass
    /// (`SessionEngine.resumeDirectly`): the first one may, the others of the pass go with the
    /// batch. One request at a time, that one is the hop saved; under load the completion
    /// queue is woken for the batch anyway, and the driver — the busiest thread then — takes
    /// on no per-request work for it (at 64 in flight, every async call resumed from the driver
    /// cost it ~4,500 instructions each, callgrind, for no gain in requests per second).
    func claimDirectResume() -> Bool {
        guard !resumedDirectly else { return false }
        resumedDirectly = true
        return true
    }

    /// Sends the gathered items to their queue (the end of the pass).
    func flush() {
        resumedDirectly = false
        guard let queue, !items.isEmpty else {
            // Its storage kept: `removeAll()` gave it up even when empty, at every pass that
            // finished nothing, and the next `retire` allocated it again (~300 instructions).
            retired.removeAll(keepingCapacity: true)
            return
        }
        self.queue = nil
        let deliver = self.deliver
        let delivered = self.delivered
        if items.count == 1 && (retired.count <= 1 || queueIsMain) {
            // One completion (one request at a time): the item and its retired object ride in
            // the block itself, and both arrays keep their storage, instead of two arrays
            // handed over and two allocated again at every pass (~500 instructions, callgrind).
            let item = items[0]
            let object = queueIsMain ? nil : retired.first
            items.removeAll(keepingCapacity: true)
            retired.removeAll(keepingCapacity: true)
            queue.async {
                deliver(item)
                if let delivered { withUnsafePointer(to: item) { delivered(UnsafeBufferPointer(start: $0, count: 1)) } }
                withExtendedLifetime(object) {}
            }
            return
        }
        let work = items
        // Not on the main queue: an app's main thread has better things to do; those are
        // freed here, on the driver thread, as before.
        let objects = queueIsMain ? [] : retired
        // The next pass likely finishes as many: one allocation instead of a growth series.
        items = []
        items.reserveCapacity(work.count)
        retired = []
        retired.reserveCapacity(objects.count)
        // The block, and with it `objects`, is released on the queue once it has run.
        queue.async {
            for item in work { deliver(item) }
            if let delivered { work.withUnsafeBufferPointer { delivered($0) } }
            withExtendedLifetime(objects) {}
        }
    }
}

/// What the driver knows of a manager's completion queue: whether one block may carry
/// several completions to it (only a serial queue keeps their order that way).
enum CompletionQueueKind: Sendable {
    /// The manager's own serial queue.
    case own
    /// The main queue (serial; the objects a batch retires are not freed there).
    case main
    /// A queue given by the caller, perhaps concurrent: one `async` per completion.
    case other

    /// The label libdispatch gives the main queue. On Linux `DispatchQueue.main` returns a new
    /// wrapper object at every use, so `queue === DispatchQueue.main` is never true: the main
    /// queue is recognised by its label, once, when the manager's queue is set.
    private static let mainQueueLabel = DispatchQueue.main.label

    init(_ queue: DispatchQueue, own: DispatchQueue) {
        if queue === own {
            self = .own
        } else if queue.label == Self.mainQueueLabel {
            self = .main
        } else {
            self = .other
        }
    }
}
