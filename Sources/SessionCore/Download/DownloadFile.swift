import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The temporary file a download task's body goes to as it arrives, and the range logic of a
/// resumed download.
///
/// Confinement: made, used and closed on the driver thread only (by the task's
/// `TaskDelegate`); a finished file's descriptor goes to its task (`DownloadFileClaim`). Bytes
/// go from curl's buffer to the file with `pwrite`, never through a `Data`: memory stays flat
/// whatever the size.
///
/// The bytes an earlier task left (the partial file of resume data) are given up only for an
/// answer that replaces them (a 200, or the range asked for from its start): an error status,
/// a refused range or a failed write leave them on disk, to continue another time.
///
/// Claiming a partial file that resume data names is in `DownloadFile+PartialFile.swift`,
/// reading `Content-Range` in `DownloadFile+ContentRange.swift`, deciding where an answer's body
/// goes in `DownloadAnswer.swift`.
final class DownloadFile {
    /// Where the file is.
    let url: URL
    /// `url.path`, made once (off the driver thread's hot path).
    private let path: String
    private var descriptor: Int32
    /// Made from resume data, or continuing on a retry the bytes an earlier attempt of its
    /// task wrote (``continueOnNextAttempt(from:)``): the engine owns the request's range
    /// fields, and an error status is a failure rather than the file's body.
    private(set) var isFromResumeData: Bool
    /// What vouches for the bytes an earlier task or attempt left in the file (the resume
    /// data's validators, or the lost attempt's response's): the resume point they make while
    /// the file holds nothing else. Nil for a new download, and once the file was cut for a
    /// body from byte 0.
    private(set) var earlier: ResumePoint?
    /// How many bytes of the file those earlier ones are (0 without any).
    var earlierLength: Int64 { earlier?.bytesReceived ?? 0 }
    /// The file position the bytes asked for with `If-Range` continue at: `earlierLength`
    /// while the partial bytes are continued, 0 once the request asks without a validator.
    private var rangeStart: Int64 = 0
    /// The position, in the whole representation, of the file's first byte: not 0 for a
    /// download of a byte range (the caller's `Range`).
    private(set) var origin: Int64
    /// The last position of the byte range the file is for, inclusive (nil: to the end).
    private(set) var rangeLast: Int64?
    /// False once the body is a 206 whose `Content-Range` cannot be read (a multipart answer):
    /// which bytes the file holds is unknown, so it cannot be continued.
    private(set) var isRangeKnown = true
    /// The `If-Range` value sent with the range.
    private(set) var validator: String?
    /// The entity tag sent in `If-Range` (a 206 carrying another one is for other bytes).
    private var sentEntityTag: String?
    /// The length the file will have when complete, as the resume data (or the lost
    /// attempt) announced it.
    private var expectedLength: Int64?
    /// Where the next body byte is written.
    private(set) var position: Int64 = 0
    /// The file's length on disk.
    private var fileLength: Int64 = 0
    /// The delivered response was no answer to the range asked for (a 416, a 206 for other
    /// bytes, the whole of a changed representation when a byte range was asked for): its body
    /// is dropped and the request is sent again without `If-Range`.
    private(set) var needsFullRestart = false
    /// The status of an answer to a download made from resume data that is neither its bytes
    /// nor a new body (404, 503, an unanswered 401, ...): its body is dropped, the earlier
    /// bytes stay and the task fails.
    private(set) var rejectedStatus: Int?
    /// Where the current response's body starts in the file, decided at its head and applied
    /// (the file cut there) only when its first body byte arrives or the transfer ends: an
    /// interim response (curl's own authentication pass) never touches the file.
    private var plannedStart: Int64?
    /// Where a planned body from byte 0 lies in the representation, applied with it.
    private var plannedRange: (origin: Int64, last: Int64?, known: Bool)?
    /// Where in the file a 206's body must end: its `Content-Range` says how many bytes it
    /// is. libcurl checks a `Content-Length` only; a chunked or close-delimited 206 that ends
    /// short (or runs long) would otherwise be taken for the whole range.
    private var bodyEnd: Int64?
    /// The current response sent more than its `Content-Range` announced: none of its bytes
    /// is vouched for (a proxy that streamed the whole body for a range), so none is
    /// continued.
    private(set) var overranItsRange = false

    /// Opens the file for a new download (created, must not exist), or the partial file of a
    /// resumed one (kept up to `offset`; when it is gone or shorter, a new file is created and
    /// the whole body, or the whole byte range, is asked for). The file is locked: two tasks
    /// never write one file.
    init(url: URL, resumingAt offset: Int64 = 0, resume: DownloadResumeData? = nil) throws(SessionError) {
        self.url = url
        path = url.path
        isFromResumeData = resume != nil
        validator = resume?.validator
        sentEntityTag = resume?.validator == resume?.entityTag ? resume?.entityTag : nil
        expectedLength = resume?.expectedLength
        origin = resume?.rangeFirst ?? 0
        rangeLast = resume?.rangeLast
        descriptor = -1
        if offset > 0, validator != nil, let claimed = try Self.claimPartialFile(at: path, keeping: offset) {
            descriptor = claimed
            earlier = resume.map {
                ResumePoint(
                    fileURL: url, bytesReceived: offset, entityTag: $0.entityTag, lastModified: $0.lastModified,
                    expectedLength: $0.expectedLength, rangeFirst: $0.rangeFirst, rangeLast: $0.rangeLast)
            }
            rangeStart = offset
            position = offset
            fileLength = offset
            return
        }
        let created = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard created >= 0 else {
            if errno == EEXIST, isFromResumeData {
                // Another task resumed from the same data made the new file first.
                throw .fileWriteFailed("the partial file '\(path)' is in use by another download task")
            }
            throw Self.failure("cannot create", path: path)
        }
        _ = flock(created, LOCK_EX | LOCK_NB)
        descriptor = created
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Whether the engine sets the request's range fields: a download made from resume data
    /// that continues its partial bytes, or that is for a byte range.
    var asksForRange: Bool { isFromResumeData && (rangeStart > 0 || origin > 0 || rangeLast != nil) }

    /// The request's header lines with the range fields added when the engine asks for a
    /// range (any the caller set are replaced). A resumed part is asked for as is,
    /// `Accept-Encoding: identity`: a range of a content-coded representation would be a range
    /// of other bytes. (Without the field any coding is acceptable, RFC 9110 §12.5.3: a server
    /// that compresses by default answered every resume gzipped, and each was started over.)
    /// The rest of the partial bytes' range goes with `If-Range`; a byte range asked for again
    /// from its start (the earlier bytes could not be continued) goes without.
    func headerLines(adding lines: [String]) -> [String] {
        guard asksForRange else { return lines }
        var result = lines.filter { line in
            let lower = line.prefix(16).lowercased()
            return !lower.hasPrefix("range:") && !lower.hasPrefix("if-range:") && !lower.hasPrefix("accept-encoding:")
        }
        result.append("Accept-Encoding: identity")
        let last = rangeLast.map { String($0) } ?? ""
        if rangeStart > 0, let validator {
            // No overflow: `DownloadResumeData` checks that its first position plus its length
            // fit, and `continueOnNextAttempt` that the next position does.
            result.append("Range: bytes=\(origin + rangeStart)-\(last)")
            result.append("If-Range: \(validator)")
        } else {
            result.append("Range: bytes=\(origin)-\(last)")
        }
        return result
    }

    /// Decides, when a delivered response's head arrives, where its body goes
    /// (`DownloadAnswer.placement`). Nothing is written or cut until ``write(_:)`` or
    /// ``prepareForEnd()``.
    func plan(statusCode: Int, contentRange: String?, entityTag: String?, lastModified: String?, isContentEncoded: Bool, hasBody: Bool) {
        needsFullRestart = false
        rejectedStatus = nil
        plannedStart = nil
        plannedRange = nil
        bodyEnd = nil
        overranItsRange = false
        let asked = DownloadAnswer.Asked(
            isFromResumeData: isFromResumeData, rangeStart: rangeStart, origin: origin, rangeLast: rangeLast,
            validator: validator, sentEntityTag: sentEntityTag, expectedLength: expectedLength)
        let answer = DownloadAnswer.Answer(
            statusCode: statusCode, range: Self.parse(contentRange: contentRange), entityTag: entityTag,
            lastModified: lastModified, isContentEncoded: isContentEncoded, hasBody: hasBody)
        switch DownloadAnswer.placement(of: answer, asked: asked) {
        case .append(let start, let end):
            plannedStart = start
            bodyEnd = end
        case .fromStart(let range, let end):
            plannedStart = 0
            plannedRange = range
            bodyEnd = end
        case .restartWithoutRange:
            needsFullRestart = true
        case .reject(let status):
            rejectedStatus = status
        }
    }

    /// The body offset the current response starts at (for progress), once planned.
    var plannedOffset: Int64 { plannedStart ?? position }

    /// Whether the current response's body is dropped (a restart or a failure follows).
    var dropsBody: Bool { needsFullRestart || rejectedStatus != nil }

    /// Whether the file holds the earlier task's bytes and nothing of this task's yet.
    var holdsOnlyEarlierBytes: Bool { earlierLength > 0 && position == earlierLength }

    /// The resume point of the earlier bytes while the file holds exactly those: what a
    /// download that gave up before adding to them leaves to continue another time.
    var earlierResumePoint: ResumePoint? { holdsOnlyEarlierBytes ? earlier : nil }

    /// Whether the current attempt wrote body bytes of its own (after any earlier ones).
    var attemptWroteBytes: Bool { position > earlierLength }

    /// Gives up the bytes the current attempt appended to the earlier ones (nothing vouches
    /// for them), keeping those: the file is cut back to them. False when the file holds no
    /// earlier bytes with a resume point, nothing was appended, or the cut failed.
    func returnToEarlierBytes() -> Bool {
        guard earlierLength > 0, position > earlierLength,
            Self.cut(descriptor, to: earlierLength)
        else { return false }
        position = earlierLength
        fileLength = earlierLength
        forgetPlan()
        return true
    }

    /// Makes the next attempt continue the bytes the file holds now, as a download made from
    /// resume data does: the rest is asked for with `If-Range` (the point's entity tag, else
    /// its date), a 206 for exactly that rest is appended, a 200 starts the file over, and an
    /// error status leaves the bytes and fails the task with resume data for them. `point` is
    /// the resume point of the attempt that was cut off (its validators vouch for the bytes).
    /// A retried 1 GiB download lost at 900 MiB asks for the last 100 MiB, as `curl --retry
    /// -C -` does, rather than starting over.
    func continueOnNextAttempt(from point: ResumePoint) {
        // `origin` is a server's `Content-Range` start: the next byte's position must fit.
        guard point.bytesReceived == position, position > 0, !origin.addingReportingOverflow(position).overflow else { return }
        let tag = point.entityTag.flatMap { $0.hasPrefix("W/") ? nil : $0 }
        guard let newValidator = tag ?? point.lastModified else { return }
        isFromResumeData = true
        validator = newValidator
        sentEntityTag = tag
        expectedLength = point.expectedLength
        earlier = point
        rangeStart = position
        // The attempt's plan was applied with its first byte: `origin` and `rangeLast` are
        // already where its bytes lie in the representation.
        forgetPlan()
    }

    /// Forgets the plan of a response that turned out to be interim (curl answered it itself).
    func forgetPlan() {
        plannedStart = nil
        plannedRange = nil
        bodyEnd = nil
        overranItsRange = false
        needsFullRestart = false
        rejectedStatus = nil
    }

    /// Asks without `If-Range` from now on, for the whole body or the whole byte range (after
    /// a 416, a mismatched 206, or a changed representation). The earlier bytes stay until
    /// that answer's body replaces them: an error status instead leaves them intact.
    func restartWithoutRange() {
        rangeStart = 0
        needsFullRestart = false
        plannedStart = nil
        plannedRange = nil
        bodyEnd = nil
        overranItsRange = false
    }

    /// Cuts the file where the planned body starts (a response whose body was empty), and
    /// checks that a 206's body is all its `Content-Range` announced (``shortfall``).
    func prepareForEnd() -> SessionError? {
        if let error = apply() { return error }
        return shortfall
    }

    /// A 206 whose body ended before the end its `Content-Range` announced: a lost connection
    /// (libcurl saw a clean end of a chunked or close-delimited body), whose bytes are good —
    /// a retry or resume data continues them. Nil otherwise.
    var shortfall: SessionError? {
        guard !dropsBody, let bodyEnd else { return nil }
        let end = plannedStart ?? position  // nothing written yet: the body would start there
        guard end < bodyEnd else { return nil }
        return .networkLost("the partial content ended after \(end) of \(bodyEnd) bytes its Content-Range announced")
    }

    /// Writes body bytes at the current position (dropped while a restart or a failure is
    /// pending).
    func write(_ bytes: UnsafeRawBufferPointer) -> SessionError? {
        guard !dropsBody, var base = bytes.baseAddress else { return nil }
        if let error = apply() { return error }
        if let bodyEnd, Int64(bytes.count) > bodyEnd - position {
            overranItsRange = true
            return .badServerResponse("the partial content runs past the \(bodyEnd) bytes its Content-Range announced")
        }
        var remaining = bytes.count
        while remaining > 0 {
            let written = pwrite(descriptor, base, remaining, off_t(position))
            if written < 0 {
                if errno == EINTR { continue }
                let error = Self.failure("cannot write to", path: path)
                // What this chunk wrote before the failure is on disk: a later body from byte 0
                // (a retry answered with a changed file) must cut it.
                fileLength = max(fileLength, position)
                return error
            }
            if written == 0 {
                fileLength = max(fileLength, position)
                return .fileWriteFailed("no byte could be written to '\(path)'")
            }
            position += Int64(written)
            remaining -= written
            base += written
        }
        fileLength = max(fileLength, position)
        return nil
    }

    /// Carries out the plan once: the file is cut where the body starts; a body from byte 0
    /// gives the earlier bytes up and means no `If-Range` is sent again.
    private func apply() -> SessionError? {
        guard let start = plannedStart else { return nil }
        plannedStart = nil
        position = start
        if start == 0 {
            rangeStart = 0
            earlier = nil
            if let plannedRange {
                origin = plannedRange.origin
                rangeLast = plannedRange.last
                isRangeKnown = plannedRange.known
            }
        }
        plannedRange = nil
        // Only a file holding more than the kept bytes is cut. Truncating a fresh, empty file
        // is not free on ext4: "truncate to 0, then write" reads as replacing a file, and
        // close() then flushes the whole body to disk (1.5 s for 1 GiB, measured).
        guard fileLength > start else { return nil }
        fileLength = start
        return Self.cut(descriptor, to: start) ? nil : Self.failure("cannot truncate", path: path)
    }

    /// Closes the file (which ends the lock); removes it unless `keep`.
    func finish(keep: Bool) {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        if !keep { unlink(path) }
    }

    /// Hands the finished file's open descriptor, and with it the lock, to the task: the
    /// claim ends once the file left this path (see `DownloadFileClaim`).
    func handOverClaim() -> DownloadFileClaim {
        let claim = DownloadFileClaim(descriptor: descriptor)
        descriptor = -1
        return claim
    }

    /// Cuts the file open as `descriptor` to `length` bytes; false (with errno) when it cannot.
    /// A cut a signal interrupts is tried again: on NFS and FUSE `ftruncate` can end in `EINTR`.
    static func cut(_ descriptor: Int32, to length: Int64) -> Bool {
        while ftruncate(descriptor, off_t(length)) != 0 {
            if errno != EINTR { return false }
        }
        return true
    }

    /// A failed file operation, with the system's reason.
    static func failure(_ action: String, path: String) -> SessionError {
        let reason = String(cString: strerror(errno))
        return .fileWriteFailed("\(action) '\(path)': \(reason)")
    }
}
