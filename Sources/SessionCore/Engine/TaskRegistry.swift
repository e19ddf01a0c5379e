/// The manager's tasks from creation until their completion handler has run, each in a slot
/// of its own (`SessionTask.registrySlot`, reserved when the task is made).
///
/// Every request registers one task and unregisters it: with a `[Int: SessionTask]` that was
/// a SipHash of the identifier each way and, on removal, a rehash of the entries after it in
/// its probe run — about 700 instructions per request under the manager's lock (callgrind,
/// 64 in flight). A slot is an array index: filling and freeing one is a store and a push.
/// Freed slots are used again first, so the array stays as long as the most tasks that were
/// ever registered at once.
///
/// A value guarded by the engine's state lock, like the rest of `SessionEngine.State`.
struct TaskRegistry {
    private var slots: [SessionTask?] = []
    /// Slots free for the next task, the most recently freed last.
    private var freeSlots: [Int] = []
    /// How many tasks are registered now.
    private(set) var count = 0

    /// A slot for a task about to be made; `fill` or `release` it.
    mutating func reserveSlot() -> Int {
        if let slot = freeSlots.popLast() { return slot }
        slots.append(nil)
        return slots.count - 1
    }

    /// Registers `task` in the slot reserved for it.
    mutating func fill(_ slot: Int, with task: SessionTask) {
        precondition(slots[slot] == nil, "a task registry slot was filled twice")
        slots[slot] = task
        count += 1
    }

    /// Gives back a reserved slot that was never filled (the task could not be registered).
    mutating func release(_ slot: Int) {
        guard slots.indices.contains(slot), slots[slot] == nil else { return }
        freeSlots.append(slot)
    }

    /// Unregisters `task`. Does nothing when it is not registered (never was, or already
    /// left): its slot may hold another task by then.
    mutating func remove(_ task: SessionTask) {
        let slot = task.registrySlot
        guard slots.indices.contains(slot), slots[slot] === task else { return }
        slots[slot] = nil
        freeSlots.append(slot)
        count -= 1
    }

    /// The registered tasks, in no particular order.
    var tasks: [SessionTask] {
        var tasks: [SessionTask] = []
        tasks.reserveCapacity(count)
        for case let task? in slots { tasks.append(task) }
        return tasks
    }

    /// The registered tasks' identifiers.
    var identifiers: Set<Int> { Set(tasks.lazy.map(\.taskIdentifier)) }
}
