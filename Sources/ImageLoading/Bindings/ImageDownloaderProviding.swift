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
    ///
    /// Keyed by `self`, the metatype it is called on at run time (`type(of: view)` for a
    /// subclass held as its base type), not by `Self`, which is the class that declared the
    /// conformance: a subclass's setting is its own, as AFNetworking's `[self class]`.
    public static var sharedImageDownloader: ImageDownloader {
        get { SharedImageDownloaders.downloader(for: ObjectIdentifier(self)) }
        set { SharedImageDownloaders.set(newValue, for: ObjectIdentifier(self)) }
    }
}
