import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a stopped download can continue from, as the driver saw it: turned into
/// `DownloadResumeData` off the driver thread (`ResumePoint.resumeData(for:)`).
struct ResumePoint: Sendable {
    var fileURL: URL
    var bytesReceived: Int64
    var entityTag: String?
    var lastModified: String?
    var expectedLength: Int64?

    /// The resume data for `task`'s request (operation queue).
    func resumeData(for task: SessionTask) -> DownloadResumeData? {
        guard let request = task.originalRequest, let url = request.url else { return nil }
        var headers = request.allHTTPHeaderFields ?? [:]
        for name in headers.keys where ["range", "if-range"].contains(name.lowercased()) { headers[name] = nil }
        return DownloadResumeData(
            url: url, headers: headers, timeoutInterval: request.timeoutInterval, partialFileURL: fileURL,
            bytesReceived: bytesReceived, entityTag: entityTag, lastModified: lastModified,
            expectedLength: expectedLength)
    }
}

extension TaskDelegate {
    /// Closes a download's file as its transfer ends: kept when the download succeeded (the
    /// engine moves it to its destination) or can be resumed, removed otherwise. A response
    /// that was held back (a 401 nobody answered) and is delivered after all is written to
    /// the file first, so the file is that response's body, like any other.
    func finishDownload(error: SessionError?) -> (fileURL: URL?, resume: ResumePoint?, error: SessionError?) {
        guard let download else { return (nil, nil, error) }
        guard let error else {
            var failure: SessionError?
            if headDisposition != .deliver, let head = responseHead {
                planDownload(download, for: head)
                failure = body.withUnsafeBytes { download.write($0) }
            }
            failure = failure ?? download.prepareForEnd()
            download.finish(keep: failure == nil)
            return failure == nil ? (download.url, nil, nil) : (nil, nil, failure)
        }
        let point = resumePoint(after: error)
        download.finish(keep: point != nil)
        return (nil, point, error)
    }

    /// The resume point when the download can continue: cancelled for resume data, or cut
    /// off (lost connection, timeout), for a GET whose bytes on disk a validator vouches for.
    private func resumePoint(after error: SessionError) -> ResumePoint? {
        guard let download, let downloadTask = task as? DownloadTask else { return nil }
        switch error {
        case .cancelled: guard downloadTask.wantsResumeData else { return nil }
        case .networkLost, .timedOut, .cannotConnect, .dnsFailure: break
        default: return nil
        }
        guard (task.originalRequest?.httpMethod ?? "GET") == "GET", !download.needsFullRestart else { return nil }
        let previous = task.options.download?.resume
        guard headDisposition == .deliver, let head = responseHead else {
            // Stopped before this attempt's answer (connecting, a redirect, a challenge): the
            // partial file it started from is untouched, and its resume data still holds.
            guard let previous, download.rangeStart > 0, download.position == download.rangeStart else { return nil }
            return ResumePoint(
                fileURL: download.url, bytesReceived: download.rangeStart, entityTag: previous.entityTag,
                lastModified: previous.lastModified, expectedLength: previous.expectedLength)
        }
        guard download.position > 0, !isContentEncoded, head.statusCode == 200 || head.statusCode == 206 else { return nil }
        // A 206 may omit the validators: the resumed download's own still hold.
        let inherited = head.statusCode == 206 ? previous : nil
        let entityTag = head.value(forHTTPHeaderField: "ETag") ?? inherited?.entityTag
        var lastModified = head.value(forHTTPHeaderField: "Last-Modified") ?? inherited?.lastModified
        if let entityTag {
            // RFC 9110 §13.1.5: never a weak tag in If-Range, and no date when a tag exists.
            guard !entityTag.hasPrefix("W/") else { return nil }
        } else {
            // A date is a validator only when strong: at least a second before the response's Date.
            guard let modified = lastModified, Self.isStrongDate(modified, responseDate: head.value(forHTTPHeaderField: "Date"))
            else { return nil }
            lastModified = modified
        }
        let announced = head.expectedContentLength
        let expected: Int64? = announced < 0 ? inherited?.expectedLength : announced + (head.statusCode == 206 ? download.rangeStart : 0)
        return ResumePoint(
            fileURL: download.url, bytesReceived: download.position, entityTag: entityTag,
            lastModified: lastModified, expectedLength: expected)
    }

    /// Whether `lastModified` is a strong validator: one second or more before `Date`
    /// (RFC 9110 §8.8.2.2).
    private static func isStrongDate(_ lastModified: String, responseDate: String?) -> Bool {
        guard let modified = HTTPDate.parse(lastModified), let date = responseDate.flatMap(HTTPDate.parse) else { return false }
        return date.timeIntervalSince(modified) >= 1
    }
}
