import Foundation

/// The command line: `curlew-image-pipeline VARIANT --base URL [--count N] [--concurrency N]
/// [--size PX] [--cache-dir DIR]`.
///
/// Variants:
/// - `c`: the C baseline (libcurl multi + libjpeg scaled decode on a pool of threads);
/// - `curlew`: ImageDownloader, image cache on, no HTTP response cache; then a second pass
///   of the same URLs on the same downloader (`curlew-memory`: from the image cache);
/// - `disk-fill`: ImageDownloader whose HTTP response cache is on disk in DIR (emptied first):
///   the network pass that fills it;
/// - `disk`: a new downloader on the cache `disk-fill` left in DIR, image cache empty.
struct PipelineOptions {
    var variant = ""
    var base = ""
    var count = 1000
    var concurrency = 4
    var size = 400
    var cacheDirectory = ""

    static func parse(_ arguments: [String]) -> PipelineOptions? {
        var options = PipelineOptions()
        var rest = arguments[...]
        guard let variant = rest.popFirst() else { return nil }
        options.variant = variant
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { return nil }
            switch flag {
            case "--base": options.base = value.hasSuffix("/") ? value : value + "/"
            case "--count": options.count = Int(value) ?? -1
            case "--concurrency": options.concurrency = Int(value) ?? -1
            case "--size": options.size = Int(value) ?? -1
            case "--cache-dir": options.cacheDirectory = value
            default: return nil
            }
        }
        guard !options.base.isEmpty, options.count > 0, options.concurrency > 0, options.size > 0 else { return nil }
        return options
    }

    /// The image URLs: photo-0000.jpg ... under the base URL.
    var urls: [String] {
        (0..<count).map { base + String(format: "photo-%04d.jpg", $0) }
    }
}
