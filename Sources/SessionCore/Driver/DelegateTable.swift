/// The driver's transfers, each found by its task's registry slot (`SessionTask.registrySlot`).
///
/// A task's slot is its own from creation until its completion handler has run, and a
/// transfer lives within that time (the driver lets go of it before its completion is
/// delivered), so no two transfers ever share a slot. Keyed by `ObjectIdentifier` in a
/// dictionary, every request paid a SipHash to add its transfer and another to remove it,
/// plus the rehash of its probe run on removal, on the driver thread; here each is an array
/// store. The array is as long as the highest slot that ever ran a transfer, so the
/// timeout scan reads about as many entries as transfers ran at once at most.
///
/// The driver thread only, like the delegates themselves.
struct DelegateTable {
    private var slots: [TaskDelegate?] = []
    /// How many transfers are in the table.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// `task`'s transfer, if it has one here.
    subscript(task: SessionTask) -> TaskDelegate? {
        let slot = task.registrySlot
        guard slot < slots.count, let delegate = slots[slot], delegate.task === task else { return nil }
        return delegate
    }

    /// Adds a transfer (in place of one its task had before, as a dictionary would).
    mutating func insert(_ delegate: TaskDelegate) {
        let slot = delegate.task.registrySlot
        if slot >= slots.count { slots.append(contentsOf: repeatElement(nil, count: slot + 1 - slots.count)) }
        if slots[slot] == nil { count += 1 }
        slots[slot] = delegate
    }

    /// Removes `delegate`; nothing when it is not the one in its task's slot.
    mutating func remove(_ delegate: TaskDelegate) {
        let slot = delegate.task.registrySlot
        guard slot < slots.count, slots[slot] === delegate else { return }
        slots[slot] = nil
        count -= 1
    }

    /// Every transfer, in slot order: a snapshot, so the table may change while it is read.
    var values: some Sequence<TaskDelegate> {
        slots.lazy.compactMap { $0 }
    }
}
