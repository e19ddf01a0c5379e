import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a finished transfer produced, handed from the driver to the completion queue.
///
/// Immutable, and a class: it goes from the driver into the task's state and into the
/// completion closure. As a struct of Foundation's resilient types (`URLRequest`, `URL`,
/// `Data`), each of those copies went through runtime metadata (~550 instructions and a
/// retain per field). A changed outcome is a new one (`with`).
final class TransferOutcome: Sendable {
    let error: SessionError?
    let request: URLRequest?
    let head: HTTPResponseHead?
    let body: Data?
    let fileURL: URL?
    let metrics: TaskMetrics?
    /// A download that stopped where it can continue: what continuing needs.
    let resumePoint: ResumePoint?
    /// Body chunks went to user code on the operation queue (decided once, when the transfer
    /// started: `TaskDelegate.deliversBody`): the completion follows them through that queue.
    let bodyWentToUserCode: Bool
    /// The answer came over TLS that a challenge handler's trust override accepted for this
    /// task only (`URLSessionManager`'s server-trust `.useCredential`), not the policy: the
    /// response cache never keeps it for other tasks.
    let admittedByTrustOverride: Bool
    /// The last request went in the clear although HSTS might have sent it over TLS (an
    /// `http://` URL of a host the manager had not learned yet): the response cache never
    /// keeps such an answer under the trust that HSTS-upgraded requests are looked up with.
    let answeredInTheClear: Bool

    init(error: SessionError?, request: URLRequest?, head: HTTPResponseHead? = nil, body: Data? = nil,
         fileURL: URL? = nil, metrics: TaskMetrics? = nil, resumePoint: ResumePoint? = nil,
         bodyWentToUserCode: Bool = false, admittedByTrustOverride: Bool = false, answeredInTheClear: Bool = false) {
        self.bodyWentToUserCode = bodyWentToUserCode
        self.admittedByTrustOverride = admittedByTrustOverride
        self.answeredInTheClear = answeredInTheClear
        self.error = error
        self.request = request
        self.head = head
        self.body = body
        self.fileURL = fileURL
        self.metrics = metrics
        self.resumePoint = resumePoint
    }

    /// The same outcome with a download's file, resume point and error.
    func with(fileURL: URL?, resumePoint: ResumePoint?, error: SessionError?) -> TransferOutcome {
        TransferOutcome(
            error: error, request: request, head: head, body: body, fileURL: fileURL, metrics: metrics,
            resumePoint: resumePoint, bodyWentToUserCode: bodyWentToUserCode, admittedByTrustOverride: admittedByTrustOverride,
            answeredInTheClear: answeredInTheClear)
    }

    /// The same outcome with another head and body (a 304 answered from the cache).
    func with(head: HTTPResponseHead?, body: Data?) -> TransferOutcome {
        TransferOutcome(
            error: error, request: request, head: head, body: body, fileURL: fileURL, metrics: metrics,
            resumePoint: resumePoint, bodyWentToUserCode: bodyWentToUserCode, admittedByTrustOverride: admittedByTrustOverride,
            answeredInTheClear: answeredInTheClear)
    }
}
