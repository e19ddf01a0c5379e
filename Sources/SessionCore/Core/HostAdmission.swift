/// How many non-multiplexed transfers run per origin (`httpMaximumConnectionsPerHost`), and
/// which waiting one starts next: the highest `SessionTask.priority`, the earliest among
/// equals. libcurl would queue the extra transfers itself, first come first served; Curlew
/// keeps them so that priority decides.
///
/// Multiplexed transfers (HTTP/2) are not counted: they share connections, and their
/// priority is the stream weight. Confinement: the driver thread only.
struct HostAdmission {
    let limit: Int
    private var active: [String: Int] = [:]
    private var waiting: [String: [TaskDelegate]] = [:]

    init(limit: Int) { self.limit = limit }

    /// The origin part of an absolute URL string ("http://host:port"), found as bytes.
    static func originKey(of urlString: String) -> String {
        let utf8 = urlString.utf8
        guard let schemeEnd = utf8.firstRange(of: "://".utf8)?.upperBound else { return urlString }
        let end = utf8[schemeEnd...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
        return String(urlString[..<(end ?? utf8.endIndex)])
    }

    /// Takes a slot for `delegate` (true: start it now) or puts it in line (false).
    mutating func admit(_ delegate: TaskDelegate, key: String) -> Bool {
        let running = active[key, default: 0]
        guard running >= limit else {
            active[key] = running + 1
            return true
        }
        waiting[key, default: []].append(delegate)
        return false
    }

    /// Frees `key`'s slot; returns the waiting transfer that takes it (already counted).
    mutating func release(_ key: String) -> TaskDelegate? {
        if var line = waiting[key], !line.isEmpty {
            var best = 0
            var bestPriority = line[0].task.priority
            for index in line.indices.dropFirst() {
                let priority = line[index].task.priority
                if priority > bestPriority { (best, bestPriority) = (index, priority) }
            }
            let next = line.remove(at: best)
            waiting[key] = line.isEmpty ? nil : line
            return next  // the slot passes to it: the count stays
        }
        let running = active[key, default: 1] - 1
        active[key] = running > 0 ? running : nil
        return nil
    }

    /// Takes a waiting transfer out of line (cancelled, timed out).
    mutating func withdraw(_ delegate: TaskDelegate, key: String) {
        guard var line = waiting[key] else { return }
        line.removeAll { $0 === delegate }
        waiting[key] = line.isEmpty ? nil : line
    }
}
