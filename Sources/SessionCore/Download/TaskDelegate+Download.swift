import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension ResumePoint {
    /// The resume data for `task`'s request (operation queue): the caller's request as it was
    /// before the adapters, which adapt the resumed task's request again. Made from the adapted
    /// one, it carried the adapters' token into a file the caller writes to disk, and the
    /// resumed request was adapted twice (a query item given twice).
    func resumeData(for task: SessionTask) -> DownloadResumeData? {
        guard let request = task.unadaptedRequest ?? task.originalRequest, let url = request.url else { return nil }
        var data = DownloadResumeData(
            url: url, headers: DownloadResumeData.resumedHeaders(of: request), timeoutInterval: request.timeoutInterval, partialFileURL: fileURL,
            bytesReceived: bytesReceived, entityTag: entityTag, lastModified: lastModified,
            expectedLength: expectedLength, rangeFirst: rangeFirst, rangeLast: rangeLast)
        // Written only when it differs from a plain request's: the data stays as before for
        // every other download.
        if !request.httpShouldHandleCookies { data.handlesCookies = false }
        return data
    }
}

extension TaskDelegate {
    /// Closes a download's file as its transfer ends: kept when the download succeeded (the
    /// engine moves it to its destination; the task holds its lock until then) or can be
    /// resumed, removed otherwise. A response that was held back (a 401 nobody answered) and is
    /// delivered after all is written to the file first, so the file is that response's body,
    /// like any other — unless the download was made from resume data: then an error status
    /// fails the task with `SessionError.resumeFailed` and the partial bytes stay.
    func finishDownload(error: SessionError?) -> (fileURL: URL?, resume: ResumePoint?, error: SessionError?) {
        guard let download else { return (nil, nil, error) }
        if let error { return giveUp(download, after: error) }
        var failure: SessionError?
        if !state.deliversResponse, let head = responseHead {
            planDownload(download, for: head)
            failure = body.withUnsafeBytes { download.write($0) }
        }
        if failure == nil, let status = download.rejectedStatus {
            let point = download.earlierResumePoint
            download.finish(keep: point != nil)
            return (nil, point, .resumeFailed(statusCode: status, resumeData: nil))  // the data: `settle`
        }
        if let failure = failure ?? download.prepareForEnd() { return giveUp(download, after: failure) }
        if let downloadTask = task as? DownloadTask {
            // Locked until the file left the path resume data may name (moved or removed).
            downloadTask.holdFileClaim(download.handOverClaim())
        } else {
            download.finish(keep: true)
        }
        return (download.url, nil, nil)
    }

    /// Ends a download that failed: its file is kept when it can be resumed, removed otherwise.
    private func giveUp(_ download: DownloadFile, after error: SessionError) -> (fileURL: URL?, resume: ResumePoint?, error: SessionError?) {
        let point = resumePoint(after: error)
        download.finish(keep: point != nil)
        return (nil, point, error)
    }

    /// The resume point when the download can continue: cancelled for resume data, cut off
    /// (lost connection, timeout), or — for a download made from resume data — any failure
    /// that did not give the partial bytes up (a full disk, a refused range answered with an
    /// error), for a GET whose bytes on disk a validator vouches for.
    private func resumePoint(after error: SessionError) -> ResumePoint? {
        guard let download, let downloadTask = task as? DownloadTask else { return nil }
        switch error {
        // A plain cancel of a download made from resume data keeps the bytes too: the caller's
        // saved resume data names them (they went, and that data with them).
        case .cancelled: guard downloadTask.wantsResumeData || download.isFromResumeData else { return nil }
        case .networkLost, .timedOut, .cannotConnect, .dnsFailure: break
        // A new download's file goes (a full disk gets its space back); bytes an earlier
        // task left for this one to continue never do.
        default: guard download.isFromResumeData else { return nil }
        }
        if let point = continuablePoint(of: download) { return point }
        // Bytes this attempt appended that nothing vouches for go; the earlier ones stay.
        return download.returnToEarlierBytes() ? download.earlierResumePoint : nil
    }

    /// The resume point of the bytes the file holds, for a GET whose bytes a validator vouches
    /// for; nil when they cannot be continued.
    private func continuablePoint(of download: DownloadFile) -> ResumePoint? {
        guard (task.originalRequest?.httpMethod ?? "GET") == "GET" else { return nil }
        // Stopped before this attempt wrote a byte (connecting, a redirect, a challenge, an
        // answer whose body was dropped): the partial file it started from is untouched.
        if download.holdsOnlyEarlierBytes { return download.earlierResumePoint }
        guard state.deliversResponse, let head = responseHead, !download.dropsBody, download.isRangeKnown,
            !download.overranItsRange, download.position > 0, !isContentEncoded, head.statusCode == 200 || head.statusCode == 206
        else { return nil }
        // Bytes appended to the earlier ones: a 206 may omit the validators, and the resumed
        // download's own still hold. A body from byte 0 has only its own.
        let inherited = download.earlierLength > 0 ? download.earlier : nil
        var entityTag = head.value(forHTTPHeaderField: "ETag") ?? inherited?.entityTag
        var lastModified = head.value(forHTTPHeaderField: "Last-Modified") ?? inherited?.lastModified
        if !Self.vouches(entityTag: entityTag, lastModified: lastModified, responseDate: head.value(forHTTPHeaderField: "Date")) {
            // A 206 appended to the earlier bytes answered an `If-Range` with their validator:
            // that validator vouches for the whole file, whatever the 206 itself carries (a
            // weak tag, a date without a `Date` to judge it by).
            guard let inherited else { return nil }
            entityTag = inherited.entityTag.flatMap { $0.hasPrefix("W/") ? nil : $0 }
            lastModified = inherited.lastModified
            guard entityTag != nil || lastModified != nil else { return nil }
        }
        let announced = head.expectedContentLength
        let expected: Int64? = announced < 0 ? inherited?.expectedLength : announced + download.earlierLength
        let isRange = download.origin > 0 || download.rangeLast != nil
        return ResumePoint(
            fileURL: download.url, bytesReceived: download.position, entityTag: entityTag,
            lastModified: lastModified, expectedLength: expected,
            rangeFirst: isRange ? download.origin : nil, rangeLast: download.rangeLast)
    }

    /// Before a retry: when this attempt of a download was cut off in a body whose bytes a
    /// validator vouches for, the next attempt continues them (`DownloadFile.continueOnNextAttempt`)
    /// instead of asking for the whole body again. An attempt that added nothing (it failed
    /// before an answer, or was answered with an error status) leaves the file's plan as it
    /// was: the bytes of the one before stay, with what vouches for them.
    func continueDownloadOnRetry() {
        guard let download, task is DownloadTask, download.attemptWroteBytes else { return }
        guard let point = continuablePoint(of: download) else {
            // Appended bytes nothing vouches for go; the earlier ones are continued again.
            _ = download.returnToEarlierBytes()
            return
        }
        download.continueOnNextAttempt(from: point)
    }

    /// Whether a response's validators can go in `If-Range` (RFC 9110 §13.1.5): a strong
    /// entity tag, or, without a tag, a strong date.
    private static func vouches(entityTag: String?, lastModified: String?, responseDate: String?) -> Bool {
        if let entityTag { return !entityTag.hasPrefix("W/") }
        guard let lastModified else { return false }
        return isStrongDate(lastModified, responseDate: responseDate)
    }

    /// Whether `lastModified` is a strong validator: one second or more before `Date`
    /// (RFC 9110 §8.8.2.2).
    private static func isStrongDate(_ lastModified: String, responseDate: String?) -> Bool {
        guard let modified = HTTPDate.parse(lastModified), let date = responseDate.flatMap(HTTPDate.parse) else { return false }
        return date.timeIntervalSince(modified) >= 1
    }
}
