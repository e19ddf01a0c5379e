/// What a client reports back from a workload; the caller adds time, CPU and memory.
struct Outcome: Sendable {
    var completed = 0
    var errors = 0
    /// Body bytes received (sent, for an upload).
    var bytes: Int64 = 0
    var firstError: String?
    /// The slow workload's memory sample.
    var slow: SlowSample?

    mutating func fail(_ message: String) {
        errors += 1
        if firstError == nil { firstError = message }
    }

    mutating func merge(_ other: Outcome) {
        completed += other.completed
        errors += other.errors
        bytes += other.bytes
        if firstError == nil { firstError = other.firstError }
    }
}

/// RSS before any slow transfer existed and once they were all receiving.
struct SlowSample: Sendable {
    var requested: Int
    var receiving: Int
    var baselineRSSKilobytes: Int
    var openRSSKilobytes: Int
}

/// A client that cannot run a workload says why, and the JSON line says n/a.
struct Unsupported: Error {
    let reason: String
}
