// Why this file exists: ThreadSanitizer cannot see the futex inside `Synchronization.Mutex`, so
// under `--sanitize=thread` every section guarded by one looked like a data race and a clean run
// meant nothing. A module's own declarations win over imported ones, so declaring `Mutex` here
// makes every `Mutex` in this module resolve to it with no change at the call sites:
// - normal builds: an alias of `Synchronization.Mutex` (same type, same code);
// - `Scripts/sanitize.sh` builds (`-DCURLEW_TSAN`): a lock on `pthread_mutex_t`, which TSan
//   intercepts, with the same API as far as this package uses it.
// Each module that uses `Mutex` has an identical copy (a type declared in a shared module would
// be ambiguous with the imported `Synchronization.Mutex` instead of shadowing it).
#if CURLEW_TSAN
import Glibc

/// `Synchronization.Mutex`'s API on a `pthread_mutex_t`, for sanitizer builds only.
struct Mutex<Value: ~Copyable>: ~Copyable {
    // Both on the heap: a pthread mutex must not move, and a ~Copyable struct may.
    private let lock: UnsafeMutablePointer<pthread_mutex_t>
    private let value: UnsafeMutablePointer<Value>

    init(_ initialValue: consuming sending Value) {
        lock = .allocate(capacity: 1)
        pthread_mutex_init(lock, nil)
        value = .allocate(capacity: 1)
        value.initialize(to: initialValue)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        pthread_mutex_destroy(lock)
        lock.deallocate()
    }

    borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return try body(&value.pointee)
    }

    borrowing func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_mutex_trylock(lock) == 0 else { return nil }
        defer { pthread_mutex_unlock(lock) }
        return try body(&value.pointee)
    }
}

// @unchecked Sendable: `value` is only reached inside `withLock`/`withLockIfAvailable`, under `lock`.
extension Mutex: @unchecked Sendable where Value: ~Copyable {}
#else
import Synchronization

/// `Synchronization.Mutex` itself outside sanitizer builds.
typealias Mutex<Value: ~Copyable> = Synchronization.Mutex<Value>
#endif
