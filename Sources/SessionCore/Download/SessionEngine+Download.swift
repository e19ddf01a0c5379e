import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SessionEngine {
    /// Settles a finished download on the operation queue: answers the resume data callers,
    /// then moves a complete file to its destination (the manager's finished-downloading hook
    /// first, then the task's destination closure) and posts the move notification. The file
    /// stays claimed (locked) until it left its temporary path: here once moved, or after the
    /// completion handler when no destination took it.
    func settle(_ task: DownloadTask, outcome: TransferOutcome, hooks: Hooks) -> TransferOutcome {
        var resume = outcome.resumePoint?.resumeData(for: task)
        if resume == nil, outcome.metrics == nil, outcome.error == .cancelled, task.wantsResumeData,
            let original = task.options.download?.resume,
            FileManager.default.fileExists(atPath: original.partialFileURL.path)
        {
            // Cancelled before it started: the resume data it was made from still holds.
            resume = original
        }
        task.settle(resumeData: resume)
        if case .resumeFailed(let status, nil)? = outcome.error {
            // The error carries the resume data too, as URLSession's error does in its userInfo.
            let failure = SessionError.resumeFailed(statusCode: status, resumeData: resume?.encoded())
            task.recordSerializationError(failure)
            return outcome.with(fileURL: nil, resumePoint: outcome.resumePoint, error: failure)
        }
        guard outcome.error == nil, let temporary = outcome.fileURL else {
            task.releaseFileClaim()
            return outcome
        }
        let destination =
            hooks.downloadDidFinish.flatMap { $0(task, temporary) }
            ?? task.callbacks.destination.map { $0(temporary, outcome.head?.httpURLResponse) }
        guard let destination, destination != temporary else { return outcome }
        defer { task.releaseFileClaim() }  // the file left its path: moved, or removed below
        do throws(SessionError) {
            // Never over anything at the destination, even one made a moment ago (DestinationMove).
            try DestinationMove.move(temporary, to: destination)
            EngineObservers.downloadDidMoveFile(task, error: nil)
            return outcome.with(fileURL: destination, resumePoint: outcome.resumePoint, error: outcome.error)
        } catch let failure {
            try? FileManager.default.removeItem(at: temporary)
            task.recordSerializationError(failure)
            EngineObservers.downloadDidMoveFile(task, error: failure)
            return outcome.with(fileURL: nil, resumePoint: outcome.resumePoint, error: failure)
        }
    }
}
