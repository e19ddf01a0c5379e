import Synchronization

/// A type whose instances load images through a shared ``ImageDownloader`` (the categories'
/// class-level `sharedImageDownloader`). Refined by ``ImageDisplaying`` and
/// ``StatefulImageDisplaying``; a type conforming to both has one shared downloader.
public protocol ImageDownloaderProviding: AnyObject {
    /// The downloader this type's bindings use. The default implementation keeps one setting
    /// per conforming type (a subclass has its own), starting at
    /// ``ImageDownloader/defaultInstance``.
    static var sharedImageDownloader: ImageDownloader { get set }
}

extension ImageDownloaderProviding {
    /// The downloader set for this type, or ``ImageDownloader/defaultInstance``.
    public static var sharedImageDownloader: ImageDownloader {
        get { SharedImageDownloaders.downloader(for: ObjectIdentifier(Self.self)) }
        set { SharedImageDownloaders.set(newValue, for: ObjectIdentifier(Self.self)) }
    }
}

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
