import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSessionManager {
    /// Unfinished download tasks.
    public var downloadTasks: [DownloadTask] { tasks.compactMap { $0 as? DownloadTask } }

    /// Creates a suspended download task: the body streams to a temporary file in
    /// `configuration.downloadDirectory` as it arrives, then moves to the URL `destination`
    /// returns.
    ///
    /// - Parameters:
    ///   - request: The request (a GET, usually).
    ///   - progress: Called on `operationQueue` as the body arrives.
    ///   - destination: Given the temporary file and the response (on `operationQueue`, once
    ///     the body is complete), returns where the file goes. An existing file there is not
    ///     replaced: the move fails, the task fails with `SessionError.fileWriteFailed` and
    ///     `downloadTaskDidFailToMoveFile` is posted. Without a destination the file stays at
    ///     its temporary URL (the response's `fileURL`) until the completion handler and the
    ///     `taskDidComplete` observers have run, then it is removed, as URLSession does.
    ///     A manager-wide `setDownloadTaskDidFinishDownloadingBlock` that returns a URL wins.
    ///   - completionHandler: Called once on `completionQueue`; on success `result` and
    ///     `fileURL` hold the file's final URL. A response with an error status is still
    ///     downloaded (check `response`).
    public func downloadTask(
        with request: URLRequest,
        progress: (@Sendable (Progress) -> Void)? = nil,
        destination: (@Sendable (URL, HTTPURLResponse?) -> URL)?,
        completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> DownloadTask {
        makeDownloadTask(request: request, resume: nil, progress: progress, destination: destination, completionHandler: completionHandler)
    }

    /// Creates a suspended download task that continues a stopped download from its resume
    /// data (see `DownloadTask.cancel(byProducingResumeData:)`): it asks for the missing bytes
    /// only (of the request's own byte range, when it had one), and starts again from byte 0
    /// when the server's representation changed, it ignores ranges, or the partial file is
    /// gone.
    ///
    /// Unlike a new download, an error status (404, 503, an unanswered 401, ...) is not taken
    /// as the file: the task fails with `SessionError.resumeFailed`, whose resume data (also
    /// the task's `resumeData`) continues the untouched partial file later. A task resumed
    /// from data another task is still using (or whose finished file is not moved yet) fails
    /// with `SessionError.fileWriteFailed` and leaves the file alone.
    ///
    /// Resume data that cannot be used (corrupt, another version, a partial file outside the
    /// download directory) gives a task that fails with `SessionError.invalidResumeData` when
    /// resumed.
    public func downloadTask(
        withResumeData resumeData: Data,
        progress: (@Sendable (Progress) -> Void)? = nil,
        destination: (@Sendable (URL, HTTPURLResponse?) -> URL)?,
        completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> DownloadTask {
        var resume: DownloadResumeData
        do {
            resume = try DownloadResumeData(encoded: resumeData)
            // The very path that was checked is the one opened.
            resume.partialFileURL = try checkPartialFile(of: resume)
        } catch {
            let task = makeDownloadTask(
                request: URLRequest(url: URL(fileURLWithPath: "/")), resume: nil, progress: progress,
                destination: destination, completionHandler: completionHandler)
            task.failBeforeStart(error)
            return task
        }
        return makeDownloadTask(
            request: resume.request, resume: resume, progress: progress, destination: destination,
            completionHandler: completionHandler)
    }

    /// Sets a block called (on `operationQueue`) as a download writes body bytes: the bytes
    /// written since the last call, the total written (with a resumed download's partial
    /// bytes) and the total expected (-1 when unknown).
    public func setDownloadTaskDidWriteDataBlock(_ block: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)?) {
        engine.updateHooks { $0.downloadDidWriteData = block }
    }

    /// Sets a block called (on `operationQueue`) when a download's body is complete, with the
    /// temporary file. A URL it returns is where the file is moved, instead of the task's own
    /// destination; nil leaves the choice to the task.
    public func setDownloadTaskDidFinishDownloadingBlock(_ block: (@Sendable (DownloadTask, URL) -> URL?)?) {
        engine.updateHooks { $0.downloadDidFinish = block }
    }

    /// Downloads `request`'s body to `destination` and returns it once the file is there.
    ///
    /// - Throws: `SessionError` (transfer, or `.fileWriteFailed` when the file cannot be
    ///   written or moved — an existing file at `destination` is not replaced), and
    ///   `SerializationError.unacceptableStatusCode` for a status outside 200–299: an error
    ///   page is never left at `destination` as if it were the file.
    public func download(for request: URLRequest, to destination: URL) async throws -> URL {
        let response = try await perform { completion in
            makeDownloadTask(
                request: request, resume: nil, progress: nil, destination: { _, _ in destination },
                completionHandler: completion)
        }
        if let head = response.head, !(200..<300).contains(head.statusCode) {
            try? FileManager.default.removeItem(at: response.fileURL ?? destination)
            guard let http = response.response else { throw SessionError.badServerResponse("status \(head.statusCode)") }
            throw SerializationError.unacceptableStatusCode(head.statusCode, response: http, data: nil)
        }
        return response.fileURL ?? destination
    }

    private func makeDownloadTask(
        request: URLRequest, resume: DownloadResumeData?, progress: (@Sendable (Progress) -> Void)?,
        destination: (@Sendable (URL, HTTPURLResponse?) -> URL)?, completionHandler: (@Sendable (DataResponse) -> Void)?
    ) -> DownloadTask {
        let fileURL = resume?.partialFileURL ?? DownloadOptions.newFileURL(for: configuration)
        var options = TaskOptions(collectsBody: false, completionHandler: completionHandler, downloadProgress: progress)
        options.callbacks.destination = destination
        options.download = DownloadOptions(fileURL: fileURL, resume: resume)
        options.defaultReceiveBufferSize = 512 * 1024
        options.multiplexedReceiveBufferSize = nil
        return engine.makeTask(DownloadTask.self, request: request, options: options)
    }

    /// Resume data names a file Curlew will truncate and write: only one of its own partial
    /// files, in the download directory, is accepted.
    private func checkPartialFile(of resume: DownloadResumeData) throws(SessionError) -> URL {
        let file = resume.partialFileURL.standardizedFileURL
        guard file.lastPathComponent.hasPrefix(DownloadOptions.partialFilePrefix),
            file.deletingLastPathComponent().path == DownloadOptions.directory(for: configuration).standardizedFileURL.path
        else {
            throw .invalidResumeData("the partial file '\(file.path)' is not in the download directory")
        }
        return file
    }
}
