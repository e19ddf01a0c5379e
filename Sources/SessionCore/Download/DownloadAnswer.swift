import Foundation

/// Where a delivered response's body goes in a download's file: the decision alone, a value
/// computed from what the file asked for and what the response's head says, which
/// `DownloadFile.plan` then carries out. Nothing here touches the file.
///
/// After the partial bytes goes a 206 for exactly the rest asked for (RFC 9110 §14.4 and
/// §15.3.7); from byte 0 a new body (a 200, or the byte range from its start); nowhere, with
/// the request sent again without `If-Range`, a 416, a 206 for other bytes or of another entity
/// tag or date than `If-Range` named, or a changed representation's whole body when a byte range
/// or a coded answer to the rest came; nowhere, with the task failing, an error status answering
/// a download made from resume data. A new download takes any answer as its body.
enum DownloadAnswer {
    /// What the file asked for.
    struct Asked {
        /// The engine owns the request's range fields (resume data, or a retry continuing).
        var isFromResumeData: Bool
        /// The file position the bytes asked for with `If-Range` continue at (0: none).
        var rangeStart: Int64
        /// The position, in the whole representation, of the file's first byte.
        var origin: Int64
        /// The last position of the byte range the file is for, inclusive (nil: to the end).
        var rangeLast: Int64?
        /// The `If-Range` value sent, and the entity tag among it.
        var validator: String?
        var sentEntityTag: String?
        /// The length the file will have when complete, as announced before.
        var expectedLength: Int64?
    }

    /// What the response's head says.
    struct Answer {
        var statusCode: Int
        /// The parsed `Content-Range` (nil: absent or unreadable).
        var range: (first: Int64, last: Int64, length: Int64)?
        var entityTag: String?
        var lastModified: String?
        /// The body is in a content coding (libcurl decodes it only when no range was asked).
        var isContentEncoded: Bool
        /// A body follows (not a HEAD's answer).
        var hasBody: Bool
    }

    /// The decision.
    enum Placement {
        /// After the partial bytes, at file position `start`; the body ends at `bodyEnd`.
        case append(start: Int64, bodyEnd: Int64?)
        /// From byte 0, lying at `range` in the representation; `bodyEnd` as above.
        case fromStart(range: (origin: Int64, last: Int64?, known: Bool), bodyEnd: Int64?)
        /// No answer to the range asked for: sent again without it.
        case restartWithoutRange
        /// No answer for a download made from resume data: the task fails with this status.
        case reject(status: Int)
    }

    /// Whether two HTTP dates name the same second. A server may write one date in any of
    /// the three forms RFC 9110 §5.6.7 lets a recipient read (an origin, a cache or a proxy
    /// between may each write it its own way): compared as text, the same date in another
    /// form was taken for another representation and the earlier bytes were given up.
    static func namesTheSameSecond(_ first: String?, _ second: String?) -> Bool {
        guard let first, let second else { return false }
        if first == second { return true }
        let seconds = CurlDate.seconds(first)
        return seconds >= 0 && seconds == CurlDate.seconds(second)
    }

    /// Where `answer`'s body goes for a file that asked `asked`.
    static func placement(of answer: Answer, asked: Asked) -> Placement {
        let status = answer.statusCode
        let range = answer.range
        let coded = answer.isContentEncoded
        if asked.isFromResumeData {
            let isNewBody = status == 200 || status == 203
            if asked.rangeStart > 0 {
                // With a date in `If-Range` (no entity tag), a 206 dated otherwise is another
                // representation's bytes: a server that ignored `If-Range` sent them.
                let sentDate = asked.sentEntityTag == nil ? asked.validator : nil
                if status == 206, !coded, let range, continues(asked, with: range),
                    answer.entityTag == nil || asked.sentEntityTag == nil || answer.entityTag == asked.sentEntityTag,
                    sentDate == nil || answer.lastModified == nil || namesTheSameSecond(answer.lastModified, sentDate)
                {
                    // File position `rangeStart` is the range's first byte (`origin + rangeStart`):
                    // it ends `last - origin + 1` in, which cannot overflow (`last` < length).
                    return .append(start: asked.rangeStart, bodyEnd: answer.hasBody ? range.last - asked.origin + 1 : nil)
                }
                // A new body in a content coding (a server that codes whatever it is asked, as
                // S3 objects stored gzipped or nginx's `gzip_static always` do) is not decoded
                // here: a range is asked for as is, without `Accept-Encoding`. Taken, the coded
                // bytes would be the file; asked for again without the range, libcurl decodes.
                if status == 206 || status == 416 || (isNewBody && (asked.origin > 0 || asked.rangeLast != nil || coded)) {
                    return .restartWithoutRange
                }
            }
            guard isNewBody || status == 206 else { return .reject(status: status) }
            // The byte range asked for again from its start (no earlier bytes to continue): a
            // 206 must begin where the range does and end within it (other bytes, from a server
            // that answers every range from byte 0, are no answer), and an answer must not be
            // coded (asked without `Accept-Encoding`: the file would be coded bytes).
            if asked.origin > 0 || asked.rangeLast != nil {
                if coded { return .reject(status: status) }
                if status == 206 {
                    guard let range, range.first == asked.origin, range.last <= (asked.rangeLast ?? .max) else {
                        return .reject(status: status)
                    }
                }
            }
        }
        // Not for a coded body (the file gets the decoded bytes) nor a HEAD's (none comes).
        let bodyEnd = status == 206 && !coded && answer.hasBody ? range.map { $0.last - $0.first + 1 } : nil
        return .fromStart(range: representationRange(statusCode: status, contentRange: range), bodyEnd: bodyEnd)
    }

    /// Whether a 206's range is exactly the rest of the partial bytes' range.
    private static func continues(_ asked: Asked, with range: (first: Int64, last: Int64, length: Int64)) -> Bool {
        let (next, overflow) = asked.origin.addingReportingOverflow(asked.rangeStart)
        guard !overflow, range.first == next else { return false }
        let end = asked.rangeLast ?? range.length - 1
        guard range.last == end else { return false }
        // No overflow: `end` is now a parsed position below the length, and `origin` >= 0.
        return asked.expectedLength.map { $0 == end - asked.origin + 1 } ?? true
    }

    /// Where a body from byte 0 lies in the representation: a 206's `Content-Range` (the
    /// whole representation when it covers all of it), the whole for any other status.
    private static func representationRange(
        statusCode: Int, contentRange range: (first: Int64, last: Int64, length: Int64)?
    ) -> (origin: Int64, last: Int64?, known: Bool) {
        guard statusCode == 206 else { return (0, nil, true) }
        guard let range else { return (0, nil, false) }
        if range.first == 0, range.last + 1 == range.length { return (0, nil, true) }
        return (range.first, range.last, true)
    }
}
