/// The events waiting for one monitor, each moved in once and out once.
///
/// An `Array` copied every event on the way out (a loop over it) and destroyed each again
/// through the generic array code when emptied: with one monitor that was ~2,000
/// instructions per request at 64 in flight, for five events (callgrind). Here `drain` moves
/// each event out to its call, in order, and the storage stays for the next batch.
///
/// `@unchecked Sendable`: a list is touched only under its target's `lists` mutex
/// (`MonitorHub.Target`), or by the one delivery block that took it out of there (each
/// delivery takes a list of its own), until that block puts it back under the mutex.
final class MonitorEventList: @unchecked Sendable {
    private var base: UnsafeMutablePointer<MonitorEvent>
    private var capacity: Int
    /// The events waiting.
    private(set) var count = 0

    init(capacity: Int = 16) {
        self.capacity = max(1, capacity)
        base = .allocate(capacity: self.capacity)
    }

    deinit {
        base.deinitialize(count: count)
        base.deallocate()
    }

    /// Adds `event` after the others.
    func append(_ event: consuming MonitorEvent) {
        if count == capacity { grow() }
        (base + count).initialize(to: event)
        count += 1
    }

    /// Hands every event to `body` in the order they were added, moving each out of the
    /// list: an event is released when `body` returns for it. Leaves the list empty, its
    /// storage kept.
    func drain(_ body: (MonitorEvent) -> Void) {
        let total = count
        count = 0  // before the calls: the list owns none of the events any more
        for index in 0..<total {
            body((base + index).move())
        }
    }

    private func grow() {
        let bigger = UnsafeMutablePointer<MonitorEvent>.allocate(capacity: capacity * 2)
        bigger.moveInitialize(from: base, count: count)
        base.deallocate()
        base = bigger
        capacity *= 2
    }
}
