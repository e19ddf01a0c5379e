import Dispatch
import Foundation
import Synchronization

/// Bounds how many images ``ImageResponseSerializer`` decodes at once in the whole process.
///
/// Decoding is CPU- and memory-heavy (a 12-megapixel photo takes 48 MB while it decodes);
/// a burst of responses finishing together would otherwise decode them all at once. A decode
/// beyond the limit waits until another one finishes, blocking the thread it runs on: for a
/// session manager's response, a thread of the engine's concurrent processing queue
/// (`SessionEngine.processingQueue`, never a completion queue: the handler is only queued
/// there once decoding ended); for a direct call of the serializer, the caller's thread.
final class DecoderConcurrencyLimit: Sendable {
    /// The process-wide limit the serializers share: one decode per active processor, at least 2.
    static let shared = DecoderConcurrencyLimit(limit: max(2, ProcessInfo.processInfo.activeProcessorCount))

    /// The most decodes that run at once.
    let limit: Int
    /// Admits `limit` decodes; DispatchSemaphore is thread-safe by itself.
    private let slots: DispatchSemaphore
    /// Decodes running now, and the most seen at once since the last reset (for tests).
    private let counts = Mutex<(running: Int, peak: Int)>((0, 0))

    init(limit: Int) {
        self.limit = max(1, limit)
        self.slots = DispatchSemaphore(value: self.limit)
    }

    /// Runs `body` once fewer than `limit` other bodies are running.
    func run<T>(_ body: () throws -> T) rethrows -> T {
        slots.wait()
        counts.withLock { counts in
            counts.running += 1
            counts.peak = max(counts.peak, counts.running)
        }
        defer {
            counts.withLock { $0.running -= 1 }
            slots.signal()
        }
        return try body()
    }

    /// The most decodes that ran at once since the last ``resetPeak()``.
    var peak: Int { counts.withLock { $0.peak } }

    /// Starts a new peak measurement.
    func resetPeak() { counts.withLock { $0.peak = $0.running } }
}
