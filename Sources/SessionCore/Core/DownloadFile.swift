import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The temporary file a download task's body goes to as it arrives, and the range logic of a
/// resumed download.
///
/// Confinement: made, used and closed on the driver thread only (by the task's
/// `TaskDelegate`). Bytes go from curl's buffer to the file with `pwrite`, never through a
/// `Data`: memory stays flat whatever the size.
final class DownloadFile {
    /// Where the file is.
    let url: URL
    /// `url.path`, made once (off the driver thread's hot path).
    private let path: String
    private var descriptor: Int32
    /// The first byte asked for with `Range` (the partial file's length when resuming;
    /// 0: the whole body is asked for, without `Range`).
    private(set) var rangeStart: Int64
    /// The `If-Range` value sent with the range.
    let validator: String?
    /// The entity tag sent in `If-Range` (a 206 carrying another one is for other bytes).
    private let sentEntityTag: String?
    /// The full length the resume data announced, when known.
    private let expectedLength: Int64?
    /// Where the next body byte is written.
    private(set) var position: Int64 = 0
    /// The file's length on disk.
    private var fileLength: Int64 = 0
    /// The delivered response was no answer to the range asked for (a 416, or a 206 for other
    /// bytes): its body is dropped and the request is sent again without `Range`.
    private(set) var needsFullRestart = false
    /// Where the current response's body starts in the file, decided at its head and applied
    /// (the file cut there) only when its first body byte arrives or the transfer ends: an
    /// interim response (curl's own authentication pass) never touches the file.
    private var plannedStart: Int64?

    /// Opens the file for a new download (created, must not exist), or the partial file of a
    /// resumed one (kept up to `offset`; when it is gone or shorter, a new file is created and
    /// the whole body is asked for). The file is locked: two tasks never write one file.
    init(url: URL, resumingAt offset: Int64 = 0, resume: DownloadResumeData? = nil) throws(SessionError) {
        self.url = url
        path = url.path
        validator = resume?.validator
        sentEntityTag = resume?.validator == resume?.entityTag ? resume?.entityTag : nil
        expectedLength = resume?.expectedLength
        rangeStart = 0
        descriptor = -1
        if offset > 0, validator != nil {
            // O_NOFOLLOW: resume data names a path; a symlink planted there is refused.
            // O_NONBLOCK: a FIFO planted there must not block the driver (refused below).
            let existing = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            if existing >= 0 {
                var status = stat()
                if fstat(existing, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG {
                    guard flock(existing, LOCK_EX | LOCK_NB) == 0 else {
                        close(existing)
                        throw .fileWriteFailed("the partial file '\(path)' is in use by another download task")
                    }
                    let size = Int64(status.st_size)
                    if size >= offset, size == offset || ftruncate(existing, off_t(offset)) == 0 {
                        descriptor = existing
                        rangeStart = offset
                        position = offset
                        fileLength = offset
                        return
                    }
                }
                close(existing)
            }
            // The partial file is gone, or not what it claims to be: start from byte 0.
            unlink(path)
        }
        let created = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard created >= 0 else { throw Self.failure("cannot create", path: path) }
        _ = flock(created, LOCK_EX | LOCK_NB)
        descriptor = created
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// The request's header lines with the range fields added when resuming (any the caller
    /// set are replaced: the engine owns them for a resumed download). A resumed part is asked
    /// for as is, without `Accept-Encoding`: a range of a content-coded representation would be
    /// a range of other bytes.
    func headerLines(adding lines: [String]) -> [String] {
        guard rangeStart > 0, let validator else { return lines }
        var result = lines.filter { line in
            let lower = line.prefix(16).lowercased()
            return !lower.hasPrefix("range:") && !lower.hasPrefix("if-range:") && !lower.hasPrefix("accept-encoding:")
        }
        result.append("Range: bytes=\(rangeStart)-")
        result.append("If-Range: \(validator)")
        return result
    }

    /// Decides, when a delivered response's head arrives, where its body goes: after the
    /// partial bytes (a 206 for exactly the rest asked for, RFC 9110 §14.4 and §15.3.7), from
    /// byte 0 (any other answer: a 200 means the representation changed or the server ignores
    /// ranges), or nowhere (a 416, or a 206 for other bytes: the request goes again without
    /// `Range`). Nothing is written or cut until ``write(_:)`` or ``prepareForEnd()``.
    func plan(statusCode: Int, contentRange: String?, entityTag: String?, isContentEncoded: Bool) {
        needsFullRestart = false
        plannedStart = 0
        guard rangeStart > 0, statusCode == 206 || statusCode == 416 else { return }
        if statusCode == 206, !isContentEncoded, let range = Self.parse(contentRange: contentRange),
            range.first == rangeStart, range.last + 1 == range.length, expectedLength.map({ $0 == range.length }) ?? true,
            entityTag == nil || sentEntityTag == nil || entityTag == sentEntityTag
        {
            plannedStart = rangeStart
            return
        }
        needsFullRestart = true
        plannedStart = nil
    }

    /// The body offset the current response starts at (for progress), once planned.
    var plannedOffset: Int64 { plannedStart ?? position }

    /// Forgets the plan of a response that turned out to be interim (curl answered it itself).
    func forgetPlan() {
        plannedStart = nil
        needsFullRestart = false
    }

    /// Asks for the whole body from now on (after a 416 or a mismatched 206).
    func restartWithoutRange() -> SessionError? {
        rangeStart = 0
        needsFullRestart = false
        plannedStart = 0
        return apply()
    }

    /// Cuts the file where the planned body starts (a response whose body was empty).
    func prepareForEnd() -> SessionError? { apply() }

    /// Writes body bytes at the current position (dropped while a full restart is pending).
    func write(_ bytes: UnsafeRawBufferPointer) -> SessionError? {
        guard !needsFullRestart, var base = bytes.baseAddress else { return nil }
        if let error = apply() { return error }
        var remaining = bytes.count
        while remaining > 0 {
            let written = pwrite(descriptor, base, remaining, off_t(position))
            if written < 0 {
                if errno == EINTR { continue }
                return Self.failure("cannot write to", path: path)
            }
            if written == 0 { return .fileWriteFailed("no byte could be written to '\(path)'") }
            position += Int64(written)
            remaining -= written
            base += written
        }
        fileLength = max(fileLength, position)
        return nil
    }

    /// Carries out the plan once: the file is cut where the body starts; a body from byte 0
    /// means no range is asked for again.
    private func apply() -> SessionError? {
        guard let start = plannedStart else { return nil }
        plannedStart = nil
        position = start
        if start == 0 { rangeStart = 0 }
        // Only a file holding more than the kept bytes is cut. Truncating a fresh, empty file
        // is not free on ext4: "truncate to 0, then write" reads as replacing a file, and
        // close() then flushes the whole body to disk (1.5 s for 1 GiB, measured).
        guard fileLength > start else { return nil }
        fileLength = start
        return ftruncate(descriptor, off_t(start)) == 0 ? nil : Self.failure("cannot truncate", path: path)
    }

    /// Closes the file; removes it unless `keep`.
    func finish(keep: Bool) {
        if descriptor >= 0 {
            close(descriptor)  // also releases the lock
            descriptor = -1
        }
        if !keep { unlink(path) }
    }

    private static func failure(_ action: String, path: String) -> SessionError {
        let reason = String(cString: strerror(errno))
        return .fileWriteFailed("\(action) '\(path)': \(reason)")
    }

    /// The positions of a `Content-Range: bytes first-last/length` value, parsed as bytes
    /// (nil when absent, malformed, or of unknown length "*").
    static func parse(contentRange value: String?) -> (first: Int64, last: Int64, length: Int64)? {
        guard let value else { return nil }
        var bytes = Substring(value).utf8.drop { $0 == UInt8(ascii: " ") }
        let unit = Array("bytes".utf8)
        guard bytes.starts(with: unit) else { return nil }
        bytes = bytes.dropFirst(unit.count).drop { $0 == UInt8(ascii: " ") }
        func number(_ terminator: UInt8?) -> Int64? {
            var result: Int64 = 0
            var digits = 0
            while let byte = bytes.first, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                let (times, overflow1) = result.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                result = sum
                digits += 1
                bytes = bytes.dropFirst()
            }
            guard digits > 0 else { return nil }
            if let terminator {
                guard bytes.first == terminator else { return nil }
                bytes = bytes.dropFirst()
            }
            return result
        }
        guard let first = number(UInt8(ascii: "-")), let last = number(UInt8(ascii: "/")), let length = number(nil),
            first <= last, last < length, bytes.allSatisfy({ $0 == UInt8(ascii: " ") })
        else { return nil }
        return (first, last, length)
    }
}
