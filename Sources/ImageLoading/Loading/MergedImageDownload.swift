import SessionCore

/// One transfer and everyone waiting for it (AFNetworking's `AFImageDownloaderMergedTask`).
struct MergedImageDownload: Sendable {
    /// Unique per downloader: tells a completion of this transfer from one of an earlier
    /// transfer for the same URL that was cancelled.
    let id: UInt64
    /// The caller's URL (`absoluteString`) with the name of its request's own credentials
    /// (`ImageRequestKey`), never the task's: a `RequestAdapter` may have sent the transfer to
    /// another URL.
    let urlIdentifier: String
    let task: DataTask
    var handlers: [ImageDownloadHandler]
}
