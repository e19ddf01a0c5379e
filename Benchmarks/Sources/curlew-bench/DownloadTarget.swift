import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The file a `download-1g-file` run writes, in the bench's own directory so that every client
/// writes (and renames) on the same file system. The clients only download; `main.swift`
/// prepares the directory before the clock starts, checks the file after it stops and removes
/// it, so the unlink of a 1 GiB file is never part of a measurement.
struct DownloadTarget: Sendable {
    /// Thrown by a client given the file workload without a target (a bug in `Workload`).
    struct Missing: Error {}

    /// Holds the file and any client's temporary files (Curlew's `downloadDirectory`,
    /// URLSession's `TMPDIR`).
    let directory: String
    /// Where the finished file goes.
    let path: String
    /// The served file's size, which a complete download has (nil when it cannot be read).
    let expectedSize: Int64?

    var url: URL { URL(fileURLWithPath: path) }
    var directoryURL: URL { URL(fileURLWithPath: directory, isDirectory: true) }

    /// Makes the directory and removes a leftover at `path` (none of the clients replaces an
    /// existing file).
    func prepare() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        remove()
    }

    /// The outcome with the file's size as its byte count; a failure when the client said it
    /// succeeded but the file is missing or not the served file's size.
    func checked(_ outcome: Outcome) -> Outcome {
        guard outcome.completed > 0 else { return outcome }
        var checked = outcome
        guard let size = Self.size(of: path) else {
            checked.completed = 0
            checked.bytes = 0
            checked.fail("the download reported success but '\(path)' does not exist")
            return checked
        }
        checked.bytes = size
        if let expectedSize, size != expectedSize {
            checked.completed = 0
            checked.fail("'\(path)' has \(size) bytes, the served file \(expectedSize)")
        }
        return checked
    }

    /// Deletes the file (nothing when it is not there).
    func remove() {
        unlink(path)
    }

    /// A file's size in bytes, or nil when it cannot be read.
    static func size(of path: String) -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int64(status.st_size)
    }
}
