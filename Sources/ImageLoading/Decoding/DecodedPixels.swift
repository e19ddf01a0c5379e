#if canImport(Glibc)
import Glibc
#endif

extension Array where Element == UInt8 {
    /// A `count`-byte pixel buffer that `decode` fills completely, without zero-filling it
    /// first: a 12-megapixel image is 48 MB, and the zero-fill was a whole pass over it before
    /// the decoder's own.
    ///
    /// A large buffer (32 MiB: 8 megapixels) is backed by huge pages where the kernel allows it
/// (see `hintHugePages`).
    ///
    /// `decode` must write every byte or throw: the bytes are uninitialised until it does, and
    /// a thrown error discards the buffer. Only for decoders that write whole rows of the whole
    /// image on success (libjpeg's rows, libpng's `png_image_finish_read`, `WebPDecode`).
    static func decodedPixels(count: Int, _ decode: (UnsafeMutablePointer<UInt8>) throws -> Void) rethrows -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: count) { buffer, initializedCount in
            guard let base = buffer.baseAddress, count > 0 else { return }
            hintHugePages(base, count: count)
            try decode(base)
            initializedCount = count
        }
    }
}

/// Asks the kernel to back the 2 MiB-aligned interior of a large pixel buffer (32 MiB or more)
/// with transparent huge pages before the decoder first touches it.
///
/// A fresh 48 MB buffer is 12,000 page faults of 4 KiB, each zeroing a page: the profile of a
/// 12-megapixel baseline JPEG spent over a third of its time in the kernel, faulting in and
/// then unmapping the buffer. With 2 MiB pages that is 24 faults. It is only a hint: where THP
/// is off (`never`) or already `always` it changes nothing, and a fault the kernel cannot serve
/// with a huge page falls back to small ones. The range lies inside this allocation only, which
/// the decoder writes in full, so huge pages cost no memory the image would not hold anyway.
private func hintHugePages(_ base: UnsafeMutablePointer<UInt8>, count: Int) {
    #if canImport(Glibc)
    let hugePage = 2 << 20
    // glibc serves a request below its largest mmap threshold (32 MiB) from the heap once the
    // threshold has risen, and the hint would outlive the image there, on whatever the heap
    // later holds: only buffers that always get a mapping of their own are hinted.
    guard count >= 32 << 20 else { return }
    let start = (Int(bitPattern: base) + hugePage - 1) & ~(hugePage - 1)
    let end = (Int(bitPattern: base) + count) & ~(hugePage - 1)
    guard end > start, let pointer = UnsafeMutableRawPointer(bitPattern: start) else { return }
    _ = madvise(pointer, end - start, MADV_HUGEPAGE)
    #endif
}
