import Foundation
import SessionCore

/// Identifies one caller's interest in a download (AFNetworking's `AFImageDownloadReceipt`):
/// pass it to ``ImageDownloader/cancelTask(for:)`` to withdraw that interest alone.
///
/// Several receipts can share one ``task``: requests for the same URL are merged into one
/// transfer.
public struct ImageDownloadReceipt: Sendable, Hashable {
    /// Identifies this caller's handlers within the merged download.
    public let receiptID: UUID
    /// The transfer, shared by every receipt for the same URL while it runs.
    public let task: SessionTask

    /// Creates a receipt.
    public init(receiptID: UUID, task: SessionTask) {
        self.receiptID = receiptID
        self.task = task
    }
}
