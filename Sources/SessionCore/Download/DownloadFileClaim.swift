import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A finished download's file descriptor, kept open (and with it the file's `flock`) until
/// the file has left the path that resume data may name: moved to its destination, or removed
/// after the completion handler ran.
///
/// Resume data can be used twice. While the claim is held, a second task resumed from the same
/// data finds the finished file locked and fails (`SessionError.fileWriteFailed`, "in use by
/// another download task") instead of cutting it back to the partial length; once the file
/// left the path, that task finds no partial file and starts from byte 0 in a file of its own.
final class DownloadFileClaim: Sendable {
    // Sendable: the descriptor lives in a Mutex and is closed once, by whichever thread
    // releases the claim first (the operation queue, the completion queue, or deinit).
    private let descriptor: Mutex<Int32>

    /// Takes over `descriptor` (open, locked).
    init(descriptor: Int32) {
        self.descriptor = Mutex(descriptor)
    }

    /// Closes the descriptor, which ends the lock. Later calls do nothing.
    func release() {
        let open = descriptor.withLock { value -> Int32 in
            defer { value = -1 }
            return value
        }
        if open >= 0 { close(open) }
    }

    deinit {
        // The explicit release is the rule; this covers an outcome that was dropped (a cancel
        // that raced with the end of the transfer), whose file was removed meanwhile.
        release()
    }
}
