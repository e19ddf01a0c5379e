import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Claiming the partial file resume data names: whatever is at that path must be this
/// user's own partial file before a byte of it is cut or written.
extension DownloadFile {
    /// Opens and locks the partial file a resumed download continues, cut to `length` bytes;
    /// nil when it is gone or is not what the resume data says (shorter, not a regular file):
    /// the download then starts from byte 0 in a new file at the same path. A longer file that
    /// cannot be cut back is an error, and left as it is.
    ///
    /// Resume data names a path, and whatever is there must be this user's own partial file
    /// before a byte is cut or written: owned by this user, one link only (a hard link is
    /// another name for someone's bytes), not writable by group or others. Anything else is
    /// refused with an error and left exactly as it is (never unlinked: it may be someone
    /// else's file).
    ///
    /// The lock is the claim. A task resumed from the same data fails while another holds it,
    /// and a finished task holds it until its file left this path (`DownloadFileClaim`). The
    /// path is checked again once locked: a file moved away (finished) between this task's
    /// `open` and its lock is never cut.
    static func claimPartialFile(at path: String, keeping length: Int64) throws(SessionError) -> Int32? {
        var found = stat()
        guard lstat(path, &found) == 0 else {
            if errno == ENOENT { return nil }
            throw failure("cannot inspect the partial file", path: path)
        }
        // Another user's entry (a file, a link, a FIFO) is theirs: refused, never removed.
        guard found.st_uid == geteuid() else { throw notOwn(path, "it belongs to uid \(found.st_uid)") }
        // O_NOFOLLOW: resume data names a path; a symlink planted there is refused.
        // O_NONBLOCK: a FIFO planted there must not block the driver (refused below).
        let existing = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard existing >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP || errno == ENXIO { unlink(path) }  // the user's own link or FIFO: it goes
            else { throw failure("cannot open the partial file", path: path) }
            return nil
        }
        var opened = stat()
        guard fstat(existing, &opened) == 0, (opened.st_mode & S_IFMT) == S_IFREG else {
            close(existing)
            unlink(path)  // the user's own, but not a download's file: it goes, a new file takes its place
            return nil
        }
        // Checked on what was opened (the path may have changed since `lstat`).
        let problem: String? =
            if opened.st_uid != geteuid() { "it belongs to uid \(opened.st_uid)" }
            else if opened.st_nlink != 1 { "it has \(opened.st_nlink) links (a hard link is another name for other bytes)" }
            else if opened.st_mode & 0o022 != 0 { "others may write to it (mode \(String(opened.st_mode & 0o777, radix: 8)))" }
            else { nil }
        if let problem {
            close(existing)
            throw notOwn(path, problem)
        }
        guard flock(existing, LOCK_EX | LOCK_NB) == 0 else {
            close(existing)
            throw .fileWriteFailed("the partial file '\(path)' is in use by another download task")
        }
        var current = stat()
        guard lstat(path, &current) == 0, current.st_dev == opened.st_dev, current.st_ino == opened.st_ino else {
            close(existing)
            throw .fileWriteFailed("the partial file '\(path)' was taken by another download task")
        }
        let size = Int64(current.st_size)
        if size == length { return existing }
        if size > length {
            if cut(existing, to: length) { return existing }
            // The bytes the resume data vouches for are there: kept, and the task fails
            // (they went with the file when a failed cut was taken for a short file).
            let error = failure("cannot cut the partial file back to \(length) bytes", path: path)
            close(existing)
            throw error
        }
        // Too short to continue: this task owns it (locked, and still at the path), so it goes.
        unlink(path)
        close(existing)
        return nil
    }

    /// The refusal of a partial file that is not this user's own (`problem` says why).
    private static func notOwn(_ path: String, _ problem: String) -> SessionError {
        .fileWriteFailed("the partial file '\(path)' is not this user's own (\(problem)): refused, and left as it is")
    }
}
