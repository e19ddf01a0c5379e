import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A file as `stat(2)` saw it when a body that sends it was made: a file replaced, grown, cut
/// or rewritten before its bytes are sent (or sent again) fails the body, which would
/// otherwise carry other bytes than those counted, or differ between a first attempt and its
/// retry. Used by multipart file parts and by file uploads (`SessionCore`'s body reader).
package struct FileIdentity: Equatable, Sendable {
    package var device: UInt64
    package var inode: UInt64
    package var size: Int64
    /// `st_mtim`, as seconds and nanoseconds (a `timespec` is not `Sendable`).
    package var modifiedSeconds: Int
    package var modifiedNanoseconds: Int

    package init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modifiedSeconds = Int(status.st_mtim.tv_sec)
        modifiedNanoseconds = Int(status.st_mtim.tv_nsec)
    }

    /// The identity of the file open at `descriptor`; nil when `fstat` fails.
    package init?(descriptor: Int32) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        self.init(status)
    }

    /// What changed from `earlier`, in words ending with `when` ("it was added": "… after it
    /// was added"); nil when nothing did.
    package func change(since earlier: FileIdentity, when: String) -> String? {
        if device != earlier.device || inode != earlier.inode { return "it was replaced by another file after \(when)" }
        if size != earlier.size { return "it is \(size) bytes now, \(earlier.size) when \(when)" }
        if self != earlier { return "it was modified after \(when)" }
        return nil
    }
}
