import Synchronization

/// Counts the requests a test route has answered, for routes that answer the first request
/// otherwise than the next ones (a 503 then a 200, a changed file at each request).
public final class RequestCounter: Sendable {
    private let count = Atomic<Int>(0)

    /// A counter at zero.
    public init() {}

    /// Counts one more request and returns its number, 1 for the first.
    public func next() -> Int {
        count.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
    }

    /// How many requests were counted.
    public var value: Int { count.load(ordering: .sequentiallyConsistent) }

    /// Starts again from zero.
    public func reset() { count.store(0, ordering: .sequentiallyConsistent) }
}
