import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The file of `-o FILE` outside `--download`: checked before the request is sent, emptied
/// only when the answer's body begins.
///
/// A request that fails before an answer (a refused connection, a TLS failure, Ctrl-C)
/// leaves the file as it was, as `curl -o` does: the old file is often the one thing the
/// user had. A file that cannot be written is reported before anything is sent. Not
/// thread-safe: `ResponseWriter` calls it under its lock.
final class OutputFile {
    /// The path as the user wrote it, for messages.
    let path: String
    private let expanded: String
    /// Open (write-only, not truncated) once the file exists or is created.
    private var descriptor: Int32 = -1
    private var started = false

    /// Checks that `path` can be written: an existing file is opened without emptying it;
    /// for a new one, its directory must let us create it.
    /// - Throws: a `ToolFailure` naming the path and the reason.
    init(path: String) throws {
        self.path = path
        expanded = (path as NSString).expandingTildeInPath
        descriptor = open(expanded, O_WRONLY | O_CLOEXEC)
        if descriptor < 0 {
            let reason = errno
            let directory = (expanded as NSString).deletingLastPathComponent
            guard reason == ENOENT, access(directory.isEmpty ? "." : directory, W_OK | X_OK) == 0 else {
                throw ToolFailure(.error, "cannot write \(path): \(String(cString: strerror(reason == ENOENT ? errno : reason)))")
            }
        }
    }

    deinit { close() }

    /// Writes body bytes; the first call empties the file (or creates it).
    /// - Returns: the message of a failed write, or nil.
    func write(_ data: Data) -> String? {
        if !started {
            started = true
            if descriptor >= 0 {
                var status = stat()
                // A regular file is emptied; /dev/null, a FIFO or a terminal cannot be.
                if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, ftruncate(descriptor, 0) != 0 {
                    return failure()
                }
            } else {
                descriptor = open(expanded, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
                if descriptor < 0 { return failure() }
            }
        }
        return data.withUnsafeBytes { buffer -> String? in
            guard var base = buffer.baseAddress else { return nil }
            var remaining = buffer.count
            while remaining > 0 {
                let written = Glibc.write(descriptor, base, remaining)
                if written < 0 {
                    if errno == EINTR { continue }
                    return failure()
                }
                remaining -= written
                base += written
            }
            return nil
        }
    }

    /// Closes the file (once).
    func close() {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
        descriptor = -1
    }

    private func failure() -> String {
        "cannot write \(path): \(String(cString: strerror(errno)))"
    }
}
