// Under `-DCURLEW_TSAN` only: this module's continuations, with the ThreadSanitizer acquire
// the Swift runtime leaves out when a resume comes before the await (why:
// Sources/Serialization/Support/Continuations.swift). Normal builds declare nothing here.
#if CURLEW_TSAN
import Serialization

/// The standard `withCheckedContinuation`, then the acquire (sanitizer builds only).
func withCheckedContinuation<T>(
    isolation: isolated (any Actor)? = #isolation, function: String = #function,
    _ body: (CheckedContinuation<T, Never>) -> Void
) async -> sending T {
    let value = await _Concurrency.withCheckedContinuation(isolation: isolation, function: function, body)
    ThreadSanitizerHandoff.acquireCurrentTask()
    return value
}

/// The standard `withCheckedThrowingContinuation`, then the acquire (sanitizer builds only).
func withCheckedThrowingContinuation<T>(
    isolation: isolated (any Actor)? = #isolation, function: String = #function,
    _ body: (CheckedContinuation<T, any Error>) -> Void
) async throws -> sending T {
    defer { ThreadSanitizerHandoff.acquireCurrentTask() }
    return try await _Concurrency.withCheckedThrowingContinuation(isolation: isolation, function: function, body)
}
#endif
