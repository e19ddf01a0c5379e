import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The hook told where a download made from resume data continues.
extension URLSessionManager {
    /// Called on `operationQueue` when a download made with `downloadTask(withResumeData:…)`
    /// gets the answer its body comes from (AFNetworking's `setDownloadTaskDidResumeBlock:`,
    /// URLSession's `urlSession(_:downloadTask:didResumeAtOffset:expectedTotalBytes:)`), with
    /// the offset the file continues from and the total expected (-1 when unknown).
    ///
    /// The offset is the partial file's length when the server sent exactly the missing bytes
    /// (a 206), and 0 when it sent the whole body again (a changed file, or a server that
    /// ignores ranges): the file then starts over. It runs before any
    /// `setDownloadTaskDidWriteDataBlock` call for that body. An answer that fails the task (an
    /// error status: `SessionError.resumeFailed`) is not reported; a retried task reports each
    /// answer it continues from, and so does any download whose retry continues the bytes an
    /// attempt cut off mid-body wrote. Pass nil to remove the hook.
    public func setDownloadTaskDidResumeBlock(_ block: (@Sendable (DownloadTask, Int64, Int64) -> Void)?) {
        engine.updateHooks { $0.downloadDidResume = block }
    }
}

extension TaskDelegate {
    /// Reports a resumed download's accepted answer to the hook (driver thread; the hook runs
    /// on the operation queue, ahead of the progress updates the body schedules there).
    /// `expectedLength`: the answer's own body length, -1 when unknown.
    func reportDownloadResumed(_ download: DownloadFile, expectedLength: Int64) {
        guard download.isFromResumeData, download.rejectedStatus == nil,
            let hook = engine.hooks.downloadDidResume, let task = task as? DownloadTask
        else { return }
        let offset = download.plannedOffset
        let total = expectedLength >= 0 ? expectedLength + offset : -1
        engine.operationQueue.async { hook(task, offset, total) }
    }
}
