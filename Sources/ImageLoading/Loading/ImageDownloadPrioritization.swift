/// The order in which an ``ImageDownloader`` starts the downloads waiting for a free slot
/// (AFNetworking's `AFImageDownloadPrioritization`).
public enum ImageDownloadPrioritization: Sendable, Hashable {
    /// First in, first out: the oldest waiting download starts first.
    case fifo
    /// Last in, first out: the newest waiting download starts first (what a scrolling list
    /// wants: the rows on screen now, not the ones scrolled past).
    case lifo
}
