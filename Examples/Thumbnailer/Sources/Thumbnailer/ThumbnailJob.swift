import Dispatch
import Foundation
import ImageLoading
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Downloads every URL through one `ImageDownloader` (at most `concurrency` transfers at once,
/// the rest queued by the downloader), decodes each straight to thumbnail size, and writes it
/// as PNG into `output`.
struct ThumbnailJob: Sendable {
    let urls: [URL]
    let output: URL
    let maximumPixelSize: Int
    let concurrency: Int
    let tally = Tally()

    /// Runs the job, calling `progress` about ten times a second (on this thread) until done.
    func run(progress: (Tally.Counts) -> Void) {
        let downloader = makeDownloader()
        // PNG encoding and the file write happen here, off the downloader's completion queue,
        // which would otherwise hold every other completion behind them.
        let writers = DispatchQueue(label: "thumbnailer.write", attributes: .concurrent)
        let group = DispatchGroup()
        for (index, url) in urls.enumerated() {
            group.enter()
            let target = output.appendingPathComponent(Self.fileName(for: url, index: index))
            downloader.downloadImage(
                for: URLRequest(url: url),
                success: { [tally] _, response, image in
                    writers.async {
                        defer { group.leave() }
                        do {
                            let png = try image.pngData()
                            try png.write(to: target, options: .atomic)
                            tally.succeeded(downloaded: Self.bodyLength(response), written: png.count)
                        } catch {
                            tally.failed(url, WriteError(path: target.path, underlying: error))
                        }
                    }
                },
                failure: { [tally] _, _, error in
                    tally.failed(url, error)
                    group.leave()
                })
        }
        while group.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            progress(tally.snapshot)
        }
        progress(tally.snapshot)
    }

    /// A manager like the downloader's default, decoding at thumbnail size (a JPEG is decoded by
    /// libjpeg at a reduced scale, so a large photo never occupies its full size in memory) and
    /// without the default's HTTP disk cache: each image is fetched once.
    private func makeDownloader() -> ImageDownloader {
        let manager = HTTPSessionManager(baseURL: nil, configuration: .default)
        var serializer = ImageResponseSerializer()
        serializer.maximumPixelSize = maximumPixelSize
        manager.responseSerializer = serializer
        // No image cache either: every image is used once, then dropped.
        return ImageDownloader(sessionManager: manager, maximumActiveDownloads: concurrency, imageCache: nil)
    }

    /// The body's size per Content-Length (0 when the server did not say).
    private static func bodyLength(_ response: HTTPURLResponse?) -> Int {
        response?.value(forHTTPHeaderField: "Content-Length").flatMap { Int($0) } ?? 0
    }

    /// The URL's last path component with its extension replaced by `.png`, restricted to
    /// characters safe in a file name; `image-INDEX.png` when nothing usable is left.
    static func fileName(for url: URL, index: Int) -> String {
        let stem = url.deletingPathExtension().lastPathComponent
        let safe = String(stem.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") ? $0 : "_" })
        let usable = !safe.isEmpty && safe.contains(where: { $0 != "_" })
        return (usable ? safe : "image-\(index)") + ".png"
    }
}
