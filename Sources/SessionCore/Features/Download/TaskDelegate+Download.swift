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
    /// engine moves it to its destination) or can be resumed, removed otherwise.
    func finishDownload(error: SessionError?) -> (fileURL: URL?, resume: ResumePoint?) {
        guard let download else { return (nil, nil) }
        guard let error else {
            download.finish(keep: true)
            return (download.url, nil)
        }
        let point = resumePoint(after: error)
        download.finish(keep: point != nil)
        return (nil, point)
    }

    /// The resume point when the download can continue: cancelled for resume data, or cut
    /// off (lost connection, timeout) after body bytes of a GET whose response carries a
    /// validator and no content coding.
    private func resumePoint(after error: SessionError) -> ResumePoint? {
        guard let download, let downloadTask = task as? DownloadTask else { return nil }
        switch error {
        case .cancelled: guard downloadTask.wantsResumeData else { return nil }
        case .networkLost, .timedOut: break
        default: return nil
        }
        guard download.position > 0, !download.needsFullRestart, !isContentEncoded, headDisposition == .deliver,
            let head = responseHead, head.statusCode == 200 || head.statusCode == 206,
            (task.originalRequest?.httpMethod ?? "GET") == "GET"
        else { return nil }
        // A 206 may omit the validators: the resumed download's own still hold.
        let previous = head.statusCode == 206 ? task.options.download?.resume : nil
        let entityTag = head.value(forHTTPHeaderField: "ETag").flatMap { $0.hasPrefix("W/") ? nil : $0 }
            ?? previous?.entityTag
        let lastModified = head.value(forHTTPHeaderField: "Last-Modified") ?? previous?.lastModified
        guard entityTag != nil || lastModified != nil else { return nil }
        let announced = head.expectedContentLength
        let expected: Int64? = announced < 0 ? previous?.expectedLength : announced + download.rangeStart
        return ResumePoint(
            fileURL: download.url, bytesReceived: download.position, entityTag: entityTag,
            lastModified: lastModified, expectedLength: expected)
    }
}
