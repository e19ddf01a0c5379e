import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ImageLoading
import SessionCore

// The image pipeline workload of Scripts/bench-pipeline.sh: see PipelineOptions for the variants.
guard let options = PipelineOptions.parse(Array(CommandLine.arguments.dropFirst())) else {
    FileHandle.standardError.write(Data("""
        usage: curlew-image-pipeline c|curlew|disk-fill|disk --base URL [--count N] \
        [--concurrency N] [--size PX] [--cache-dir DIR]\n
        """.utf8))
    exit(2)
}
let urls = options.urls.compactMap(URL.init(string:))
var failed = false

@MainActor func report(_ result: PassResult) {
    result.printLine()
    if result.errors > 0 || result.images != options.count { failed = true }
}

@MainActor func diskCache() -> ResponseCache? {
    guard !options.cacheDirectory.isEmpty else {
        FileHandle.standardError.write(Data("--cache-dir is required for \(options.variant)\n".utf8))
        exit(2)
    }
    // Memory capacity 0: every answer of the disk variant is read from the files.
    let cache = ResponseCache(memoryCapacity: 0, diskCapacity: 2 << 30,
                              directory: URL(fileURLWithPath: options.cacheDirectory, isDirectory: true))
    if let error = cache.diskStoreError {
        FileHandle.standardError.write(Data("the disk cache is unusable: \(error)\n".utf8))
        exit(1)
    }
    return cache
}

switch options.variant {
case "c":
    report(runCBaseline(options))
case "curlew":
    let downloader = ImageDownloader(
        sessionManager: makeManager(size: options.size, responseCache: nil),
        maximumActiveDownloads: options.concurrency, imageCache: makeImageCache())
    report(runPass("curlew", downloader: downloader, urls: urls))
    report(runPass("curlew-memory", downloader: downloader, urls: urls))
case "disk-fill":
    try? FileManager.default.removeItem(atPath: options.cacheDirectory)
    let downloader = ImageDownloader(
        sessionManager: makeManager(size: options.size, responseCache: diskCache()),
        maximumActiveDownloads: options.concurrency, imageCache: makeImageCache())
    report(runPass("disk-fill", downloader: downloader, urls: urls))
    // The cache writes its files on its own queue after each completion: wait until every
    // answer can be read back before the process ends (not timed; at most a minute).
    if let cache = downloader.sessionManager.configuration.responseCache {
        var missing = urls
        for _ in 0..<600 where !missing.isEmpty {
            missing.removeAll { cache.cachedResponse(for: URLRequest(url: $0)) != nil }
            if !missing.isEmpty { Thread.sleep(forTimeInterval: 0.1) }
        }
        if !missing.isEmpty {
            FileHandle.standardError.write(Data("\(missing.count) responses never reached the disk cache\n".utf8))
            failed = true
        }
    }
case "disk":
    let downloader = ImageDownloader(
        sessionManager: makeManager(size: options.size, responseCache: diskCache()),
        maximumActiveDownloads: options.concurrency, imageCache: makeImageCache())
    report(runPass("disk", downloader: downloader, urls: urls))
default:
    FileHandle.standardError.write(Data("unknown variant \(options.variant)\n".utf8))
    exit(2)
}
exit(failed ? 1 : 0)
