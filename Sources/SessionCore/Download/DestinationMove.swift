internal import CCurl
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Moves a finished download's temporary file to the destination its caller chose, never
/// replacing anything that is there.
///
/// `FileManager.moveItem` checks that the destination is free and then renames: a file made at
/// that path between the two steps (by another process, or planted by another user in a shared
/// directory) would be replaced and its bytes lost; a dangling symbolic link there is replaced
/// too. Here the check and the move are one step, as the kernel offers it:
/// 1. `renameat2(RENAME_NOREPLACE)`: fails with `EEXIST` for any entry at the destination;
/// 2. where the file system or kernel has no such flag (`EINVAL`, `ENOSYS`, or `EPERM` from a
///    sandbox that refuses the system call): `link(2)`, which never replaces either, then
///    `unlink(2)` of the temporary name;
/// 3. across file systems (`EXDEV`): the bytes are copied, a buffer at a time, into a new file
///    (`O_EXCL | O_NOFOLLOW`) of a name of its own beside the destination, which then takes the
///    destination's name as in 1 or 2: nobody sees a partial file under that name, and a failed
///    copy removes its own file, never anything else. The download's temporary file goes last.
///
/// Only a file system with neither the flag nor hard links (some FUSE and FAT mounts) falls back
/// to FileManager's check-then-rename.
enum DestinationMove {
    /// The copy's buffer across file systems: large enough for few system calls, small enough
    /// that a multi-gigabyte download never sits in memory.
    static let copyBufferSize = 256 * 1024

    /// Moves the file at `source` to `destination`; on failure the destination is as it was and
    /// the source stays where it is.
    static func move(_ source: URL, to destination: URL) throws(SessionError) {
        let from = source.path
        let to = destination.path
        if curlew_rename_noreplace(from, to) == 0 { return }
        switch errno {
        case EINVAL, ENOSYS, EPERM:
            try moveByLink(from, to)
        case EXDEV:
            try copyAcross(from, to, besides: destination)
        default:
            throw failure(to)
        }
    }

    /// `link(2)` then `unlink(2)`: a second name that cannot replace an entry, then the first goes.
    private static func moveByLink(_ from: String, _ to: String) throws(SessionError) {
        guard link(from, to) == 0 else {
            switch errno {
            case EXDEV:
                try copyAcross(from, to, besides: URL(fileURLWithPath: to))
            case EPERM, EOPNOTSUPP, ENOSYS:
                // No hard links here: the check and the rename are two steps, as FileManager's are.
                var entry = stat()
                if lstat(to, &entry) == 0 { throw failure(to, errno: EEXIST) }
                guard errno == ENOENT else { throw failure(to) }
                guard rename(from, to) == 0 else { throw failure(to) }
            default:
                throw failure(to)
            }
            return
        }
        unlink(from)
    }

    /// Copies the bytes into a new file of its own in `to`'s directory, moves that to `to`
    /// (never over an existing entry), then removes `from`.
    private static func copyAcross(_ from: String, _ to: String, besides destination: URL) throws(SessionError) {
        let input = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard input >= 0 else { throw failure(to) }
        defer { close(input) }
        // A name of its own, short whatever the destination's (a long one plus a suffix could
        // pass NAME_MAX).
        let copy = destination.deletingLastPathComponent().appendingPathComponent(".curlew-\(UUID().uuidString)").path
        // The download's own mode (0600 as it was made): a copy is no more open than the file.
        let output = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard output >= 0 else { throw failure(to) }
        if let problem = copyBytes(from: input, to: output) {
            close(output)
            unlink(copy)  // made by this call (O_EXCL): only its own copy goes
            throw failure(to, errno: problem)
        }
        // A network file system reports a failed write as late as close(2).
        guard close(output) == 0 else {
            let problem = errno
            unlink(copy)
            throw failure(to, errno: problem)
        }
        // On one file system now: the copy takes the destination's name in one step.
        do throws(SessionError) {
            if curlew_rename_noreplace(copy, to) != 0 {
                guard [EINVAL, ENOSYS, EPERM].contains(errno) else { throw failure(to) }
                try moveByLink(copy, to)
            }
        } catch {
            unlink(copy)
            throw error
        }
        unlink(from)
    }

    /// Copies `input` to its end into `output`; the errno of a failure, nil once every byte is
    /// written.
    private static func copyBytes(from input: Int32, to output: Int32) -> Int32? {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: copyBufferSize, alignment: 16)
        defer { buffer.deallocate() }
        guard let base = buffer.baseAddress else { return ENOMEM }
        while true {
            let count = read(input, base, buffer.count)
            if count == 0 { return nil }
            if count < 0 {
                if errno == EINTR { continue }
                return errno
            }
            var written = 0
            while written < count {
                let step = write(output, base + written, count - written)
                if step < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                written += step
            }
        }
    }

    /// The error for a move to `path` that failed with `code` (errno when not given).
    private static func failure(_ path: String, errno code: Int32 = errno) -> SessionError {
        let reason = code == EEXIST ? "something is already there" : String(cString: strerror(code))
        return .fileWriteFailed("cannot move the download to '\(path)': \(reason)")
    }
}
