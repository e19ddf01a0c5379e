import Foundation

/// One slot's download in flight (the categories' `af_activeImageDownloadReceipt`).
struct ActiveImageDownload: Sendable {
    let receiptID: UUID
    let urlIdentifier: String
    /// The downloader it was started with: cancelling must go to the same one, even if the
    /// type's shared downloader changed since.
    let downloader: ImageDownloader
    /// Set once the downloader returned it (nil before, or when the image came from the cache).
    var receipt: ImageDownloadReceipt?
}
