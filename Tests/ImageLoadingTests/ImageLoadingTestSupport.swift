import CurlewTestSupport
import Foundation
import ImageLoading
import Serialization
import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Turns a body of raw RGBA bytes into an `Image`, its size read from `X-Width` / `X-Height`:
/// lets the downloader and bindings be tested without any codec.
struct RawImageSerializer: ResponseSerialization {
    func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> Image {
        guard let response, (200..<300).contains(response.statusCode),
              let width = response.value(forHTTPHeaderField: "X-Width").flatMap({ Int($0) }),
              let height = response.value(forHTTPHeaderField: "X-Height").flatMap({ Int($0) })
        else { throw SessionError.badServerResponse("not a raw test image") }
        return try Image(width: width, height: height, pixels: [UInt8](data ?? Data()))
    }
}

/// Builders for test images and their responses.
enum TestImages {
    /// A `width` × `height` image filled with `value`.
    static func image(width: Int = 2, height: Int = 2, value: UInt8 = 7) throws -> Image {
        try Image(width: width, height: height, pixels: [UInt8](repeating: value, count: width * height * 4))
    }

    /// A response carrying `image` for ``RawImageSerializer``, optionally delayed.
    static func response(_ image: Image, delay: Duration = .zero) -> TestResponse {
        var response = TestResponse(
            status: 200,
            headers: [("Content-Type", "application/octet-stream"), ("X-Width", "\(image.width)"), ("X-Height", "\(image.height)")],
            body: Data(image.pixels))
        response.delayBeforeHead = delay
        return response
    }

    /// A downloader on a fresh manager that reads ``RawImageSerializer`` bodies.
    static func downloader(
        prioritization: ImageDownloadPrioritization = .fifo, maximumActiveDownloads: Int = 4,
        cache: (any ImageRequestCache)? = AutoPurgingImageCache()
    ) -> ImageDownloader {
        let manager = HTTPSessionManager(baseURL: nil)
        manager.responseSerializer = RawImageSerializer()
        return ImageDownloader(
            sessionManager: manager, downloadPrioritization: prioritization,
            maximumActiveDownloads: maximumActiveDownloads, imageCache: cache)
    }
}

/// Collects values from callbacks on any queue.
final class Recorder<Value: Sendable>: Sendable {
    private let storage = Mutex<[Value]>([])
    func append(_ value: Value) { storage.withLock { $0.append(value) } }
    var values: [Value] { storage.withLock { $0 } }
    var count: Int { storage.withLock { $0.count } }
}

extension XCTestCase {
    /// Waits (bounded: about 20 s) until `condition` holds, then asserts it. A hang guard for
    /// work that finishes on another queue, not a timing assertion.
    func eventually(
        _ condition: () -> Bool, _ message: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        for _ in 0..<2000 where !condition() { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(condition(), message, file: file, line: line)
    }

    /// Stops a downloader's manager and waits until it has let go of everything.
    func shutDown(_ downloader: ImageDownloader) async {
        downloader.sessionManager.invalidateSessionCancelingTasks(true, resetSession: false)
        await downloader.sessionManager.waitUntilInvalidated()
    }
}

extension TestServer {
    /// How many requests for `path` arrived.
    func requestCount(_ path: String) -> Int { requests.filter { $0.path == path }.count }
}

/// The process's memory figures from /proc/self/status, in kB.
enum MemoryStatus {
    /// A field such as `VmHWM` (peak resident) or `VmPeak` (peak virtual); nil off Linux.
    static func kilobytes(_ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            // "VmSize:\t    3892 kB": the number is padded after a tab, and a value of 8 digits
            // or more (a sanitizer's shadow reservation) follows the tab directly.
            return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().lazy.compactMap { Int($0) }.first
        }
        return nil
    }

    /// Resets VmHWM to the current resident size, where the kernel allows it.
    static func resetResidentPeak() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    /// Runs `body` with the process's address space (RLIMIT_AS) limited to `bytes`, then
    /// restores the limit: an allocation that maps more than that fails inside `body`.
    static func withAddressSpaceLimit<T>(bytes: Int, _ body: () throws -> T) throws -> T {
        let resource = __rlimit_resource_t(RLIMIT_AS.rawValue)
        var original = rlimit()
        guard getrlimit(resource, &original) == 0 else { throw POSIXError(.EPERM) }
        var limited = original
        limited.rlim_cur = min(original.rlim_max, rlim_t(bytes))
        guard setrlimit(resource, &limited) == 0 else { throw POSIXError(.EPERM) }
        defer { _ = setrlimit(resource, &original) }
        return try body()
    }
}
