#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Which sanitizer runtime the test binary was linked with (`Scripts/sanitize.sh`), so that the
/// few tests whose measurement a sanitizer invalidates can say so and skip instead of failing.
public enum Sanitizers {
    /// AddressSanitizer: it keeps freed memory in a quarantine (256 MiB by default) before
    /// reusing it, so a bound on resident memory measures the quarantine, not the code.
    public static let address = isLinked("__asan_init")
    /// ThreadSanitizer.
    public static let thread = isLinked("__tsan_init")

    /// Both runtimes export their entry points from the executable they are linked into.
    private static func isLinked(_ symbol: String) -> Bool {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), symbol) != nil  // RTLD_DEFAULT
    }
}
