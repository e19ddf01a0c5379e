import Dispatch
import Foundation

/// A streamed response body's chunks, handed from the driver to user code on the operation
/// queue.
extension SessionEngine {
    /// Hands a streamed body chunk to user code on the operation queue (the task's data
    /// handler, then `hook`: the data-received hook as it was when the transfer started);
    /// resumes the paused transfer once enough has been consumed.
    func deliver(
        _ chunk: Data, for task: SessionTask, hook: (@Sendable (DataTask, Data) -> Void)?, credit: StreamCredit
    ) {
        operationQueue.async { [self] in
            task.callbacks.dataHandler?(chunk)
            if let hook, let dataTask = task as? DataTask { hook(dataTask, chunk) }
            if credit.consume(StreamCredit.cost(of: chunk.count)) { submit(.resumeReading(task)) }
        }
    }

    /// Shows a streamed response's chunk to the data-received hook (operation queue); the
    /// chunk itself went to the stream's consumer. The copy waiting for the hook is charged to
    /// `credit` as the stream's is (the caller added it): a hook that is behind holds the
    /// transfer back too, or a fast consumer let a slow hook's copies of the whole body pile
    /// up on the queue.
    func deliverToHook(
        _ chunk: Data, for task: SessionTask, hook: @escaping @Sendable (DataTask, Data) -> Void, credit: StreamCredit
    ) {
        operationQueue.async { [self] in
            if let dataTask = task as? DataTask { hook(dataTask, chunk) }
            if credit.consume(StreamCredit.cost(of: chunk.count)) { submit(.resumeReading(task)) }
        }
    }
}
