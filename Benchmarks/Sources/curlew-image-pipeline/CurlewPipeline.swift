import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ImageLoading
import SessionCore
import Synchronization

/// Counts the finished loads of one pass and wakes the waiting thread after the last.
final class PassCounter: Sendable {
    private let state = Mutex<(done: Int, errors: Int, width: Int, height: Int)>((0, 0, 0, 0))
    private let finished = DispatchSemaphore(value: 0)
    let expected: Int

    init(expected: Int) { self.expected = expected }

    func succeeded(_ image: Image) {
        let last = state.withLock { state -> Bool in
            state.done += 1
            state.width = image.width
            state.height = image.height
            return state.done == expected
        }
        if last { finished.signal() }
    }

    func failed() {
        let last = state.withLock { state -> Bool in
            state.done += 1
            state.errors += 1
            return state.done == expected
        }
        if last { finished.signal() }
    }

    /// Waits for every load, at most `timeout` seconds; false when they did not all end.
    func wait(timeout: Double) -> Bool { finished.wait(timeout: .now() + timeout) == .success }

    var snapshot: (done: Int, errors: Int, width: Int, height: Int) { state.withLock { $0 } }
}

/// A manager like ImageDownloader's default one, decoding to `size` pixels, with the given
/// HTTP response cache (nil: none).
func makeManager(size: Int, responseCache: ResponseCache?) -> HTTPSessionManager {
    var configuration = SessionConfiguration.default
    configuration.responseCache = responseCache
    let manager = HTTPSessionManager(baseURL: nil, configuration: configuration)
    var serializer = ImageResponseSerializer()
    serializer.maximumPixelSize = size
    manager.responseSerializer = serializer
    return manager
}

/// An image cache that holds all the pass's images (1,000 × 400 × 300 × 4 bytes = 480 MB:
/// the default 100 MiB would purge most of them before the second pass).
func makeImageCache() -> AutoPurgingImageCache {
    AutoPurgingImageCache(memoryCapacity: 2 << 30, preferredMemoryCapacity: 1536 << 20)
}

/// Loads every URL through `downloader` (all asked for at once: it runs
/// `maximumActiveDownloads` at a time) and measures the pass.
func runPass(_ variant: String, downloader: ImageDownloader, urls: [URL]) -> PassResult {
    let counter = PassCounter(expected: urls.count)
    let start = Usage.now()
    for url in urls {
        downloader.downloadImage(
            for: URLRequest(url: url),
            success: { _, _, image in counter.succeeded(image) },
            failure: { _, _, _ in counter.failed() })
    }
    let complete = counter.wait(timeout: 600)
    let end = Usage.now()
    let seen = counter.snapshot
    let errors = seen.errors + (complete ? 0 : urls.count - seen.done)
    return PassResult(variant: variant, images: seen.done - seen.errors, errors: errors, start: start, end: end,
                      width: seen.width, height: seen.height)
}
