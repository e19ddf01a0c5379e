import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The handlers of one receipt (AFNetworking's `AFImageDownloaderResponseHandler`).
struct ImageDownloadHandler: Sendable {
    let receiptID: UUID
    /// The caller's request, as given (before any `RequestAdapter`): what its handlers are
    /// called with when the receipt is cancelled.
    let request: URLRequest
    let success: ImageDownloader.SuccessHandler?
    let failure: ImageDownloader.FailureHandler?
    /// The task priority this receipt asked for (the default, 0.5, when it named none): a
    /// download runs at the highest of its receipts', and falls back when one cancels.
    var priority: Float = 0.5
}
