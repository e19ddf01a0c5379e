import Synchronization

/// The downloader chosen for each conforming type, keyed by the type's identity (types live
/// as long as the process, so the key is never reused).
enum SharedImageDownloaders {
    private static let table = Mutex<[ObjectIdentifier: ImageDownloader]>([:])

    static func downloader(for type: ObjectIdentifier) -> ImageDownloader {
        table.withLock { $0[type] } ?? .defaultInstance
    }

    static func set(_ downloader: ImageDownloader, for type: ObjectIdentifier) {
        table.withLock { $0[type] = downloader }
    }
}
