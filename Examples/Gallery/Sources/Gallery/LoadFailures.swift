import Synchronization

/// Downloads that failed, for the script (any thread may record one).
enum LoadFailures {
    private static let failures = Mutex<[String]>([])

    static func record(_ failure: String) {
        failures.withLock { $0.append(failure) }
    }

    static var all: [String] { failures.withLock { $0 } }
}
