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
    private var descriptor: Int32
    /// The first byte asked for with `Range` (the partial file's length when resuming;
    /// 0: the whole body is asked for, without `Range`).
    private(set) var rangeStart: Int64
    /// The `If-Range` value sent with the range.
    let validator: String?
    /// Where the next body byte is written; the file's length.
    private(set) var position: Int64 = 0
    /// The delivered response was no answer to the range asked for (a 416, or a 206 for other
    /// bytes): its body is dropped and the request is sent again without `Range`.
    private(set) var needsFullRestart = false

    /// Opens the file for a new download (created, must not exist), or the partial file of a
    /// resumed one (kept up to `resume.offset`; when it is gone or shorter, a new file is
    /// created and the whole body is asked for).
    init(url: URL, resumingAt offset: Int64 = 0, validator: String? = nil) throws(SessionError) {
        self.url = url
        self.validator = validator
        rangeStart = 0
        descriptor = -1
        let path = url.path
        if offset > 0, validator != nil {
            // O_NOFOLLOW: resume data names a path; a symlink planted there is refused.
            let existing = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
            if existing >= 0 {
                var status = stat()
                if fstat(existing, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, Int64(status.st_size) >= offset,
                    ftruncate(existing, off_t(offset)) == 0
                {
                    descriptor = existing
                    rangeStart = offset
                    position = offset
                    return
                }
                close(existing)
            }
            // The partial file is gone, or not what it claims to be: start from byte 0.
            unlink(path)
        }
        let created = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard created >= 0 else { throw Self.failure("cannot create", path: path) }
        descriptor = created
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// The request's header lines with the range fields added when resuming (any the caller
    /// set are replaced: the engine owns them for a resumed download).
    func headerLines(adding lines: [String]) -> [String] {
        guard rangeStart > 0, let validator else { return lines }
        var result = lines.filter { line in
            let lower = line.prefix(9).lowercased()
            return !lower.hasPrefix("range:") && !lower.hasPrefix("if-range:")
        }
        result.append("Range: bytes=\(rangeStart)-")
        result.append("If-Range: \(validator)")
        return result
    }

    /// Decides, when the delivered response's head arrives, where its body goes: after the
    /// partial bytes (a 206 for exactly the range asked for), from byte 0 (any other answer:
    /// a 200 means the representation changed or the server ignores ranges), or nowhere (a
    /// 416 or a 206 for other bytes: the request goes again without `Range`).
    ///
    /// - Returns: An error when the file could not be truncated.
    func begin(statusCode: Int, contentRange: String?, isContentEncoded: Bool) -> SessionError? {
        needsFullRestart = false
        if rangeStart > 0 {
            if statusCode == 206, !isContentEncoded, Self.firstByte(ofContentRange: contentRange) == rangeStart {
                // Cut back to the partial bytes: an earlier attempt of this task may have
                // written past them.
                position = rangeStart
                return ftruncate(descriptor, off_t(rangeStart)) == 0 ? nil : Self.failure("cannot truncate", path: url.path)
            }
            if statusCode == 206 || statusCode == 416 {
                needsFullRestart = true
                return nil
            }
        }
        rangeStart = 0
        return truncate()
    }

    /// Asks for the whole body from now on (after a 416 or a mismatched 206).
    func restartWithoutRange() -> SessionError? {
        rangeStart = 0
        needsFullRestart = false
        return truncate()
    }

    /// Writes body bytes at the current position (dropped while a full restart is pending).
    func write(_ bytes: UnsafeRawBufferPointer) -> SessionError? {
        guard !needsFullRestart, var base = bytes.baseAddress else { return nil }
        var remaining = bytes.count
        while remaining > 0 {
            let written = pwrite(descriptor, base, remaining, off_t(position))
            if written < 0 {
                if errno == EINTR { continue }
                return Self.failure("cannot write to", path: url.path)
            }
            if written == 0 { return .fileWriteFailed("no byte could be written to '\(url.path)'") }
            position += Int64(written)
            remaining -= written
            base += written
        }
        return nil
    }

    /// Closes the file; removes it unless `keep`.
    func finish(keep: Bool) {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        if !keep { unlink(url.path) }
    }

    private func truncate() -> SessionError? {
        position = 0
        return ftruncate(descriptor, 0) == 0 ? nil : Self.failure("cannot truncate", path: url.path)
    }

    private static func failure(_ action: String, path: String) -> SessionError {
        let reason = String(cString: strerror(errno))
        return .fileWriteFailed("\(action) '\(path)': \(reason)")
    }

    /// The first byte position of a `Content-Range: bytes first-last/length` value, parsed
    /// as bytes (nil when absent or malformed).
    static func firstByte(ofContentRange value: String?) -> Int64? {
        guard let value else { return nil }
        var utf8 = Substring(value).utf8.drop { $0 == UInt8(ascii: " ") }
        let unit = Array("bytes".utf8)
        guard utf8.starts(with: unit) else { return nil }
        utf8 = utf8.dropFirst(unit.count).drop { $0 == UInt8(ascii: " ") }
        var first: Int64 = 0
        var digits = 0
        for byte in utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { break }
            let (times, overflow1) = first.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            first = sum
            digits += 1
        }
        guard digits > 0, utf8.dropFirst(digits).first == UInt8(ascii: "-") else { return nil }
        return first
    }
}
