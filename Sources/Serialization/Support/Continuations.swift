// Why this file exists: ThreadSanitizer learns that a resumed task happens after its
// `resume(...)` from the Swift runtime, which tells TSan "release" on the task in
// `swift_continuation_resume` and "acquire" when the task's job next runs. When the resume
// lands before the task reached its `await` (the body handed the continuation to another
// thread, which answered at once), `swift_continuation_await` returns without suspending and
// without the "acquire" (Swift 6.3; checked in the runtime's disassembly). TSan then sees no
// order between the resuming thread and the task, and reports every value handed over as a
// data race: the CI run of 2026-11-26 reported 7 in `HTTPResponseHead.httpURLResponse`, a
// head built on the driver thread and read by a test after `await manager.data(for:)`.
// A 20-line program shows it (a class built on a queue, resumed before the await): 3 reports
// without this file's functions, 0 with them (Docs/Reliability.md).
//
// As with `Mutex.swift`, a module's own declarations win over imported ones: under
// `-DCURLEW_TSAN` (only `Scripts/sanitize.sh thread` sets it) each module that awaits a
// continuation declares `withCheckedContinuation` and `withCheckedThrowingContinuation` that
// call the standard ones and then tell TSan the acquire the runtime left out. Normal builds
// declare nothing: every call is the standard library's, unchanged.
#if CURLEW_TSAN
import Glibc

/// What the Swift runtime tells ThreadSanitizer, completed (sanitizer builds only).
package enum ThreadSanitizerHandoff {
    private typealias Annotation = @convention(c) (UnsafeMutableRawPointer?) -> Void

    /// `__tsan_acquire`, found the way the Swift runtime finds it (nil without TSan linked).
    private static let acquire: Annotation? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_acquire").map {
        unsafeBitCast($0, to: Annotation.self)
    }

    /// Orders the current task after every `resume` of a continuation it awaited: the runtime
    /// released on the task's address when resuming, so acquiring there completes the pair.
    package static func acquireCurrentTask() {
        withUnsafeCurrentTask { task in
            guard let task, let acquire else { return }
            acquire(unsafeBitCast(task, to: UnsafeMutableRawPointer.self))
        }
    }
}

/// The standard `withCheckedContinuation`, then the acquire the runtime skips when the resume
/// came first (sanitizer builds only).
func withCheckedContinuation<T>(
    isolation: isolated (any Actor)? = #isolation, function: String = #function,
    _ body: (CheckedContinuation<T, Never>) -> Void
) async -> sending T {
    let value = await _Concurrency.withCheckedContinuation(isolation: isolation, function: function, body)
    ThreadSanitizerHandoff.acquireCurrentTask()
    return value
}

/// The standard `withCheckedThrowingContinuation`, then the same acquire (sanitizer builds only).
func withCheckedThrowingContinuation<T>(
    isolation: isolated (any Actor)? = #isolation, function: String = #function,
    _ body: (CheckedContinuation<T, any Error>) -> Void
) async throws -> sending T {
    defer { ThreadSanitizerHandoff.acquireCurrentTask() }
    return try await _Concurrency.withCheckedThrowingContinuation(isolation: isolation, function: function, body)
}
#endif
