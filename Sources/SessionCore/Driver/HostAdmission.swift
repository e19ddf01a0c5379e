/// How many non-multiplexed transfers run per origin (`httpMaximumConnectionsPerHost`), and
/// which waiting one starts next: the highest `SessionTask.priority`, the earliest among
/// equals. libcurl would queue the extra transfers itself, first come first served; Curlew
/// keeps them so that priority decides.
///
/// Multiplexed transfers (HTTP/2) are not counted: they share connections, and their
/// priority is the stream weight. Confinement: the driver thread only.
struct HostAdmission {
    /// One origin's running count and line. A transfer keeps a reference to its origin, so
    /// releasing a slot needs no lookup. An idle origin (nothing runs or waits there) stays in
    /// the table until more than `idleOriginsKept` origins are known: at one request at a
    /// time, taking it out at every release and making it again at the next admission was a
    /// `String` hash twice and an allocation per request (~900 instructions, callgrind).
    final class Origin {
        let key: String
        // The driver thread only, one access at a time (like DriverLoop.delegates): no dynamic
        // exclusivity check, which reading `waiting` paid at every release (~180 instructions).
        @exclusivity(unchecked) fileprivate(set) var active = 0
        @exclusivity(unchecked) fileprivate(set) var waiting: [TaskDelegate] = []
        fileprivate init(key: String) { self.key = key }
    }

    let limit: Int
    private var origins: [String: Origin] = [:]
    /// The origin of the last admission, while it is in the table: most transfers go where
    /// the one before went, and comparing the key is cheaper than hashing it.
    private var lastOrigin: Origin?
    /// How many origins the table may hold before its idle ones are dropped, all at once (so
    /// a client that visits many hosts pays for the sweep once per this many new origins).
    static let idleOriginsKept = 64

    init(limit: Int) { self.limit = limit }

    /// Takes a slot at `key`'s origin for `delegate` (`admitted`: start it now) or puts it in
    /// line (`admitted` false). Either way the origin comes back, for `release` and `withdraw`.
    mutating func admit(_ delegate: TaskDelegate, key: String) -> (origin: Origin, admitted: Bool) {
        let origin: Origin
        if let last = lastOrigin, last.key == key {
            origin = last
        } else if let known = origins[key] {
            origin = known
        } else {
            origin = Origin(key: key)
            origins[key] = origin
        }
        lastOrigin = origin
        guard origin.active >= limit else {
            origin.active += 1
            return (origin, true)
        }
        origin.waiting.append(delegate)
        return (origin, false)
    }

    /// Frees a slot of `origin`; returns the waiting transfer that takes it (already counted).
    mutating func release(_ origin: Origin) -> TaskDelegate? {
        if !origin.waiting.isEmpty {
            var best = 0
            var bestPriority = origin.waiting[0].task.priority
            for index in origin.waiting.indices.dropFirst() {
                let priority = origin.waiting[index].task.priority
                if priority > bestPriority { (best, bestPriority) = (index, priority) }
            }
            return origin.waiting.remove(at: best)  // the slot passes to it: the count stays
        }
        origin.active = max(0, origin.active - 1)
        if origin.active == 0 { becameIdle() }
        return nil
    }

    /// An origin has nothing running or waiting: past `idleOriginsKept` origins, every idle
    /// one leaves the table.
    private mutating func becameIdle() {
        guard origins.count > Self.idleOriginsKept else { return }
        origins = origins.filter { $0.value.active > 0 || !$0.value.waiting.isEmpty }
        if let last = lastOrigin, origins[last.key] !== last { lastOrigin = nil }
    }

    /// Takes a waiting transfer out of line (cancelled, timed out).
    mutating func withdraw(_ delegate: TaskDelegate, from origin: Origin) {
        origin.waiting.removeAll { $0 === delegate }
        if origin.active == 0 && origin.waiting.isEmpty { becameIdle() }
    }
}
