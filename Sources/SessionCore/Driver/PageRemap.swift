internal import CCurl

/// `mremap(2)` with `MREMAP_MAYMOVE`, which Glibc's Swift overlay does not import (a
/// variadic C function): the C shim that wraps it lives with libcurl's, imported here only.
enum PageRemap {
    /// Moves or grows the mapping at `base` from `oldLength` to `newLength` bytes, keeping its
    /// contents; nil when the kernel refuses.
    static func grow(_ base: UnsafeMutableRawPointer, from oldLength: Int, to newLength: Int) -> UnsafeMutableRawPointer? {
        curlew_mremap_maymove(base, oldLength, newLength)
    }
}
