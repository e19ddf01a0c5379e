import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A task whose response body streams to a file as it arrives (memory stays flat whatever
/// the size), then moves to the destination you choose: AFNetworking's download task.
///
/// Make one with `URLSessionManager.downloadTask(with:progress:destination:completionHandler:)`
/// or, to continue a stopped download, `downloadTask(withResumeData:...)`.
public final class DownloadTask: SessionTask, @unchecked Sendable {
    // @unchecked Sendable: the download's own mutable state lives in `downloadState`, a
    // Mutex; `download` is an immutable value.

    struct DownloadState {
        /// `cancel(byProducingResumeData:)` was called: the partial file is kept.
        var wantsResumeData = false
        var resumeDataHandlers: [@Sendable (Data?) -> Void] = []
        /// The handlers were answered; later callers get nil at once.
        var isSettled = false
        var resumeData: DownloadResumeData?
        /// The finished file's claim, held until the file left its temporary path.
        var fileClaim: DownloadFileClaim?
    }

    private let downloadState = Mutex(DownloadState())

    /// Resume data, when the download stopped in a way it can continue from: cancelled by
    /// `cancel(byProducingResumeData:)`, or failed on a lost connection or a timeout after
    /// bytes with a validator (entity tag or date) arrived. A download made from resume data
    /// also leaves it when it fails in any other way without giving its partial bytes up: an
    /// error status (`SessionError.resumeFailed`, which carries the same data), a full disk.
    /// Set before the completion handler runs; pass it to `downloadTask(withResumeData:...)`.
    public var resumeData: Data? { downloadState.withLock { $0.resumeData }?.encoded() }

    /// Cancels the download and hands `completionHandler` (on the manager's operation queue)
    /// what is needed to continue it later, or nil when it cannot be continued: nothing was
    /// received yet, the response had neither a strong entity tag nor a `Last-Modified` date,
    /// the body was content-encoded, or the task had already finished. The task then completes
    /// with `SessionError.cancelled`.
    ///
    /// The partial file stays in the download directory until a resumed task uses it (see
    /// ``DownloadResumeData``).
    public func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
        let settled = downloadState.withLock { state -> Bool in
            guard !state.isSettled else { return true }
            state.wantsResumeData = true
            state.resumeDataHandlers.append(completionHandler)
            return false
        }
        if settled {
            engine.operationQueue.async { completionHandler(nil) }
            return
        }
        cancel()
    }

    /// Whether the caller asked for resume data (read by the driver when the transfer ends).
    var wantsResumeData: Bool { downloadState.withLock { $0.wantsResumeData } }

    /// Keeps the finished file claimed until it left its temporary path (driver thread).
    func holdFileClaim(_ claim: DownloadFileClaim) {
        downloadState.withLock { $0.fileClaim = claim }
    }

    /// Ends the claim on the finished file: it was moved to its destination, or removed.
    func releaseFileClaim() {
        let claim = downloadState.withLock { state -> DownloadFileClaim? in
            defer { state.fileClaim = nil }
            return state.fileClaim
        }
        claim?.release()
    }

    /// Records how the download ended and answers `cancel(byProducingResumeData:)` callers
    /// (operation queue, before the completion handler).
    func settle(resumeData: DownloadResumeData?) {
        let handlers = downloadState.withLock { state -> [@Sendable (Data?) -> Void] in
            state.isSettled = true
            state.resumeData = resumeData
            defer { state.resumeDataHandlers = [] }
            return state.resumeDataHandlers
        }
        guard !handlers.isEmpty else { return }
        let encoded = resumeData?.encoded()
        for handler in handlers { handler(encoded) }
    }
}

/// A download task's fixed choices.
struct DownloadOptions: Sendable {
    /// The name prefix of every temporary download file (resume data may name only these).
    static let partialFilePrefix = "CurlewDownload-"

    /// Where download bodies are written while they arrive.
    static func directory(for configuration: SessionConfiguration) -> URL {
        configuration.downloadDirectory ?? FileManager.default.temporaryDirectory
    }

    /// A new temporary file's URL in the download directory.
    static func newFileURL(for configuration: SessionConfiguration) -> URL {
        directory(for: configuration).appendingPathComponent("\(partialFilePrefix)\(UUID().uuidString).tmp")
    }

    /// The temporary file the body is written to.
    var fileURL: URL
    /// Where a resumed download continues from (nil: from byte 0).
    var resume: DownloadResumeData?
}
