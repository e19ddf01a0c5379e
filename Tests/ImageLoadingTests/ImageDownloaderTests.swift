import CurlewTestSupport
import Foundation
import Serialization
import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// `ImageDownloader` against the in-process server: merging, cancellation, ordering, the
/// cache, errors and credentials. Delays only keep a transfer open; nothing asserts on time.
final class ImageDownloaderTests: XCTestCase {
    private var server: TestServer!
    private var picture: Image!

    override func setUp() async throws {
        server = try TestServer()
        picture = try TestImages.image(width: 4, height: 3, value: 42)
        server.route("/fast", response: TestImages.response(picture))
        server.route("/slow", response: TestImages.response(picture, delay: .milliseconds(300)))
        for name in ["a", "b", "c", "d"] {
            server.route("/\(name)", response: TestImages.response(picture, delay: .milliseconds(100)))
        }
        server.route("/missing", response: .text("no", status: 404))
    }

    override func tearDown() async throws {
        server.shutdown()
    }

    private func request(_ path: String) throws -> URLRequest { URLRequest(url: try server.url(path)) }

    func testFiftySimultaneousRequestsShareOneTransfer() async throws {
        let downloader = TestImages.downloader()
        let images = Recorder<Image>()
        let receipts = try (0..<50).map { _ in
            try downloader.downloadImage(for: request("/slow"), success: { _, response, image in
                XCTAssertEqual(response?.statusCode, 200)
                images.append(image)
            }, failure: { _, _, error in XCTFail("\(error)") })
        }
        XCTAssertEqual(Set(receipts.compactMap { $0?.task.taskIdentifier }).count, 1, "one task for all 50")
        XCTAssertEqual(Set(receipts.compactMap { $0?.receiptID }).count, 50, "a receipt each")
        try await eventually({ images.count == 50 }, "50 images delivered")
        XCTAssertTrue(images.values.allSatisfy { $0 == picture })
        XCTAssertEqual(server.requestCount("/slow"), 1, "one transfer")
        XCTAssertTrue(downloader.pendingDownloadCount == (0, 0, 0))
        await shutDown(downloader)
    }

    /// Merged receipts share the transfer, and each handler is called with the request its own
    /// receipt was made for (as a cancelled receipt's is).
    func testEachMergedReceiptIsAnsweredWithItsOwnRequest() async throws {
        let downloader = TestImages.downloader(cache: nil)
        let seen = Recorder<String>()
        for caller in ["1", "2", "3"] {
            var request = try request("/slow")
            request.setValue(caller, forHTTPHeaderField: "X-Caller")
            downloader.downloadImage(
                for: request, success: { request, _, _ in seen.append(request.value(forHTTPHeaderField: "X-Caller") ?? "-") },
                failure: { _, _, error in XCTFail("\(error)") })
        }
        try await eventually({ seen.count == 3 }, "all three delivered")
        XCTAssertEqual(server.requestCount("/slow"), 1, "one transfer")
        XCTAssertEqual(Set(seen.values), ["1", "2", "3"], "every caller was handed the first caller's request")
        await shutDown(downloader)
    }

    func testCancellingOneOfTwoMergedReceiptsFailsOnlyThatOne() async throws {
        let downloader = TestImages.downloader()
        let first = Recorder<String>(), second = Recorder<String>()
        let receipt = try XCTUnwrap(downloader.downloadImage(
            for: try request("/slow"),
            success: { _, _, _ in first.append("success") },
            failure: { _, _, error in first.append((error as? SessionError) == .cancelled ? "cancelled" : "\(error)") }))
        downloader.downloadImage(
            for: try request("/slow"),
            success: { _, _, _ in second.append("success") },
            failure: { _, _, error in second.append("\(error)") })
        downloader.cancelTask(for: receipt)
        try await eventually({ second.count == 1 }, "the other receipt completes")
        XCTAssertEqual(second.values, ["success"])
        XCTAssertEqual(first.values, ["cancelled"], "the cancelled receipt fails with .cancelled, and only that")
        XCTAssertNil(receipt.task.error, "the shared transfer was not cancelled")
        XCTAssertEqual(server.requestCount("/slow"), 1)
        downloader.cancelTask(for: receipt)  // again, after the end: nothing happens
        XCTAssertEqual(first.values, ["cancelled"])
        await shutDown(downloader)
    }

    func testCancellingEveryReceiptCancelsTheTransfer() async throws {
        let downloader = TestImages.downloader(cache: nil)
        let outcomes = Recorder<String>()
        let receipts = try (0..<2).map { _ in
            try XCTUnwrap(downloader.downloadImage(
                for: try request("/slow"), success: { _, _, _ in outcomes.append("success") },
                failure: { _, _, error in outcomes.append((error as? SessionError) == .cancelled ? "cancelled" : "\(error)") }))
        }
        for receipt in receipts { downloader.cancelTask(for: receipt) }
        try await eventually({ receipts[0].task.state == .completed }, "the transfer ends")
        XCTAssertEqual(receipts[0].task.error as? SessionError, .cancelled)
        try await eventually({ outcomes.count == 2 }, "both receipts told")
        XCTAssertEqual(outcomes.values, ["cancelled", "cancelled"])
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "nothing left, the slot freed")
        await shutDown(downloader)
    }

    func testLIFOStartsTheNewestWaitingDownloadFirst() async throws {
        let downloader = TestImages.downloader(prioritization: .lifo, maximumActiveDownloads: 1, cache: nil)
        let finished = Recorder<String>()
        for name in ["slow", "a", "b", "c"] {
            downloader.downloadImage(for: try request("/\(name)"), success: { request, _, _ in
                finished.append(request.url?.lastPathComponent ?? "?")
            })
        }
        XCTAssertTrue(downloader.pendingDownloadCount == (4, 3, 1), "one active, three waiting")
        try await eventually({ finished.count == 4 }, "all four done")
        XCTAssertEqual(finished.values, ["slow", "c", "b", "a"])
        XCTAssertEqual(server.requests.map(\.path), ["/slow", "/c", "/b", "/a"], "started one at a time, newest first")
        await shutDown(downloader)
    }

    func testFIFOStartsTheOldestWaitingDownloadFirst() async throws {
        let downloader = TestImages.downloader(prioritization: .fifo, maximumActiveDownloads: 1, cache: nil)
        let finished = Recorder<String>()
        for name in ["slow", "a", "b", "c"] {
            downloader.downloadImage(for: try request("/\(name)"), success: { request, _, _ in
                finished.append(request.url?.lastPathComponent ?? "?")
            })
        }
        try await eventually({ finished.count == 4 }, "all four done")
        XCTAssertEqual(finished.values, ["slow", "a", "b", "c"])
        await shutDown(downloader)
    }

    func testAHigherPriorityDownloadOvertakesAWaitingPrefetch() async throws {
        let downloader = TestImages.downloader(prioritization: .fifo, maximumActiveDownloads: 1, cache: nil)
        let finished = Recorder<String>()
        let record: ImageDownloader.SuccessHandler = { request, _, _ in finished.append(request.url?.lastPathComponent ?? "?") }
        downloader.downloadImage(for: try request("/slow"), success: record)
        _ = downloader.downloadImage(for: try request("/a"), withReceiptID: UUID(), priority: 0.1, success: record, failure: nil)
        downloader.downloadImage(for: try request("/b"), success: record)
        try await eventually({ finished.count == 3 }, "all three done")
        XCTAssertEqual(finished.values, ["slow", "b", "a"])
        await shutDown(downloader)
    }

    /// A view that joined a waiting prefetch lifted it to the default priority; once that view
    /// cancels, the download serves the prefetch alone again and waits behind what is on screen.
    func testAPrefetchLiftedByAViewThatCancelledWaitsAgainBehindWhatIsOnScreen() async throws {
        let downloader = TestImages.downloader(prioritization: .fifo, maximumActiveDownloads: 1, cache: nil)
        let finished = Recorder<String>()
        let record: ImageDownloader.SuccessHandler = { request, _, _ in finished.append(request.url?.lastPathComponent ?? "?") }
        downloader.downloadImage(for: try request("/slow"), success: record)
        _ = downloader.downloadImage(for: try request("/a"), withReceiptID: UUID(), priority: 0.1, success: record, failure: nil)
        let view = try XCTUnwrap(downloader.downloadImage(for: try request("/a")))
        XCTAssertEqual(view.task.priority, 0.5, "the view lifted the prefetch")
        downloader.cancelTask(for: view)
        XCTAssertEqual(view.task.priority, 0.1, "the prefetch alone is left: its priority is the prefetch's again")
        downloader.downloadImage(for: try request("/b"), success: record)
        try await eventually({ finished.count == 3 }, "all three done")
        XCTAssertEqual(finished.values, ["slow", "b", "a"], "the prefetch went before what is on screen")
        await shutDown(downloader)
    }

    func testCancellingAWaitingDownloadDoesNotTakeASlot() async throws {
        let downloader = TestImages.downloader(maximumActiveDownloads: 1, cache: nil)
        let finished = Recorder<String>()
        downloader.downloadImage(for: try request("/slow"), success: { _, _, _ in finished.append("slow") })
        let waiting = try XCTUnwrap(downloader.downloadImage(for: try request("/a")))
        downloader.downloadImage(for: try request("/b"), success: { _, _, _ in finished.append("b") })
        downloader.cancelTask(for: waiting)
        try await eventually({ finished.count == 2 }, "the others complete")
        XCTAssertEqual(finished.values, ["slow", "b"])
        XCTAssertEqual(server.requestCount("/a"), 0, "a cancelled waiting download is never sent")
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "no slot leaked")
        await shutDown(downloader)
    }

    func testTheCacheIsConsultedFirst() async throws {
        let cache = AutoPurgingImageCache()
        let downloader = TestImages.downloader(cache: cache)
        let url = try server.url("/fast")
        let first = Recorder<Image>()
        XCTAssertNotNil(downloader.downloadImage(for: URLRequest(url: url), success: { _, _, image in first.append(image) }))
        try await eventually({ first.count == 1 }, "downloaded")
        XCTAssertEqual(cache.image(for: URLRequest(url: url), withAdditionalIdentifier: nil), picture, "stored in the cache")

        let responses = Recorder<Bool>()
        let expected = picture
        let receipt = downloader.downloadImage(for: URLRequest(url: url), success: { _, response, image in
            responses.append(response == nil && image == expected)
        })
        XCTAssertNil(receipt, "a cache hit has no receipt")
        try await eventually({ responses.count == 1 }, "success from the cache")
        XCTAssertEqual(responses.values, [true], "the cached image, with a nil response")
        XCTAssertEqual(server.requestCount("/fast"), 1, "no second transfer")

        // A request that asks for a reload skips the image cache.
        var reload = URLRequest(url: url)
        reload.cachePolicy = .reloadIgnoringLocalCacheData
        let reloaded = Recorder<Bool>()
        XCTAssertNotNil(downloader.downloadImage(for: reload, success: { _, response, _ in reloaded.append(response != nil) }))
        try await eventually({ reloaded.count == 1 }, "reloaded")
        XCTAssertEqual(reloaded.values, [true])
        XCTAssertEqual(server.requestCount("/fast"), 2)
        await shutDown(downloader)
    }

    /// A request that shapes its own answer (a condition, a range, `Cache-Control: no-cache`,
    /// `Pragma: no-cache`) reaches the server, and what it fetched is not stored; nor is a part
    /// (a 206) a server sent to a plain request. Before, such requests were answered from the
    /// image cache (the caller's condition or directive ignored) and a range's image was
    /// stored for the plain URL. A `Cache-Control` that does not ask the origin keeps the cache.
    func testARequestThatShapesItsOwnAnswerIsNotAnsweredFromTheImageCache() async throws {
        let cache = AutoPurgingImageCache()
        let downloader = TestImages.downloader(cache: cache)
        var part = TestImages.response(picture)
        part.status = 206
        part.headers.append(("Content-Range", "bytes 0-\(picture.pixels.count - 1)/\(picture.pixels.count)"))
        server.route("/part", response: part)
        func download(_ path: String, _ field: (name: String, value: String)?) async throws -> Bool {
            var request = try request(path)
            if let field { request.setValue(field.value, forHTTPHeaderField: field.name) }
            let fetched = Recorder<Bool>()
            downloader.downloadImage(
                for: request, success: { _, response, _ in fetched.append(response != nil) },
                failure: { _, _, error in XCTFail("\(path) \(String(describing: field)): \(error)") })
            try await eventually({ fetched.count == 1 }, "\(path) \(String(describing: field))")
            return fetched.values == [true]
        }
        // Not stored: a part (for a range request and for a plain one), and the answer to a
        // request that said no-store.
        let unstored: [(path: String, field: (name: String, value: String)?, what: String)] = [
            ("/part", ("Range", "bytes=0-"), "a range's answer"), ("/part", nil, "a 206 to a plain request"),
            ("/fast", ("Cache-Control", "no-store"), "a no-store request's answer"),
        ]
        for (path, field, what) in unstored {
            let reached = try await download(path, field)
            XCTAssertTrue(reached, what)
            XCTAssertNil(cache.image(for: try request(path), withAdditionalIdentifier: nil), what)
        }
        // Stored by a plain request, then asked past the cache by each shaped one.
        let plainReached = try await download("/fast", nil)
        XCTAssertTrue(plainReached)
        XCTAssertEqual(server.requestCount("/fast"), 2)
        let shaped = [
            ("If-None-Match", "\"v1\""), ("If-Modified-Since", "Sun, 29 Nov 2026 10:00:00 GMT"), ("Range", "bytes=0-3"),
            ("Cache-Control", "max-age=0"), ("Cache-Control", "max-age=\"00\""), ("Cache-Control", "private, NO-CACHE"),
            ("Pragma", "no-cache"),
        ]
        for (index, field) in shaped.enumerated() {
            let shapedReached = try await download("/fast", field)
            XCTAssertTrue(shapedReached, "\(field) reached the server")
            XCTAssertEqual(server.requestCount("/fast"), 3 + index, "\(field)")
        }
        let staleReached = try await download("/fast", ("Cache-Control", "max-stale=60"))
        XCTAssertFalse(staleReached, "answered from the image cache")
        let plainReachedAgain = try await download("/fast", nil)
        XCTAssertFalse(plainReachedAgain, "the plain request still finds the image cached")
        XCTAssertEqual(server.requestCount("/fast"), 2 + shaped.count)
        await shutDown(downloader)
    }

    /// A refresh (`Cache-Control: no-cache`) fetches the image past the cache and its whole
    /// answer replaces the cached one: the plain requests after it get the new version.
    func testARefreshReplacesTheCachedImage() async throws {
        let cache = AutoPurgingImageCache()
        let downloader = TestImages.downloader(cache: cache)
        let versions = RequestCounter()
        let images = try (1...3).map { try TestImages.image(value: UInt8($0)) }
        server.route("/versioned") { _ in TestImages.response(images[min(versions.next(), images.count) - 1]) }
        let url = try server.url("/versioned")
        func download(refresh: Bool) async throws -> (fetched: Bool, version: UInt8?) {
            var request = URLRequest(url: url)
            if refresh { request.setValue("no-cache", forHTTPHeaderField: "Cache-Control") }
            let delivered = Recorder<(Bool, UInt8?)>()
            downloader.downloadImage(
                for: request, success: { _, response, image in delivered.append((response != nil, image.pixels.first)) },
                failure: { _, _, error in XCTFail("\(error)") })
            try await eventually({ delivered.count == 1 }, "delivered")
            return delivered.values.first ?? (false, nil)
        }
        var outcome = try await download(refresh: false)
        XCTAssertEqual(outcome.fetched, true)
        XCTAssertEqual(outcome.version, 1)
        outcome = try await download(refresh: true)
        XCTAssertEqual(outcome.fetched, true, "the refresh went to the server")
        XCTAssertEqual(outcome.version, 2)
        outcome = try await download(refresh: false)
        XCTAssertEqual(outcome.fetched, false, "answered from the image cache")
        XCTAssertEqual(outcome.version, 2, "the refresh's image replaced the first")
        XCTAssertEqual(versions.value, 2)
        await shutDown(downloader)
    }

    /// The image cache meets the serializer's decoding: downloaders sharing one cache, one that
    /// downsamples (`maximumPixelSize`) and one that decodes at full size, each get the image as
    /// its own serializer makes it, and each then finds its own in the cache.
    func testDownloadersThatDecodeDifferentlyDoNotAnswerEachOtherFromASharedCache() async throws {
        let photo = try TestImages.image(width: 64, height: 64, value: 200).pngData()
        server.route("/photo.png", response: TestResponse(status: 200, headers: [("Content-Type", "image/png")], body: photo))
        let shared = AutoPurgingImageCache()
        let thumbnails = decodingDownloader(maximumPixelSize: 8, cache: shared)
        let fullSize = decodingDownloader(maximumPixelSize: nil, cache: shared)
        let doubleScale = decodingDownloader(maximumPixelSize: nil, scale: 2, cache: shared)
        let thumbnail = try await loadPhoto(thumbnails)
        XCTAssertEqual([thumbnail.width, thumbnail.height], [8, 8])
        let full = try await loadPhoto(fullSize)
        XCTAssertEqual([full.width, full.height], [64, 64], "the full-size downloader was given the thumbnail")
        let scaled = try await loadPhoto(doubleScale)
        XCTAssertEqual(scaled.scale, 2, "the @2x downloader was given a @1x image")
        XCTAssertEqual(server.requestCount("/photo.png"), 3)

        // Each one's next load is a hit on its own variant.
        let thumbnailAgain = try await loadPhoto(thumbnails)
        let fullAgain = try await loadPhoto(fullSize)
        let scaledAgain = try await loadPhoto(doubleScale)
        XCTAssertEqual([thumbnailAgain.width, fullAgain.width, scaledAgain.width], [8, 64, 64])
        XCTAssertEqual(scaledAgain.scale, 2)
        XCTAssertEqual(server.requestCount("/photo.png"), 3, "every second load came from the cache")
        for downloader in [thumbnails, fullSize, doubleScale] { await shutDown(downloader) }
    }

    /// An app empties the image cache at a sign-out (Docs/ImageLoading.md): an avatar whose
    /// download started before (unlocked by the jar's cookies, which its request does not
    /// show) arrived after and was put back, to answer the next user's view of the same URL.
    /// The server empties the cache while it answers: after the transfer started, before its
    /// image arrived.
    func testAnImageArrivingAfterTheCacheWasEmptiedIsNotPutBack() async throws {
        let cache = AutoPurgingImageCache()
        let answer = TestImages.response(picture)
        server.route("/me/avatar") { _ in
            cache.removeAllImages()
            return answer
        }
        server.route("/other", response: answer)
        let downloader = TestImages.downloader(cache: cache)
        for path in ["/me/avatar", "/other"] {
            let loaded = Recorder<Image>()
            _ = try downloader.downloadImage(
                for: request(path), success: { _, _, image in loaded.append(image) }, failure: { _, _, error in XCTFail("\(error)") })
            try await eventually({ loaded.count == 1 }, "\(path) delivered")
        }
        XCTAssertNil(cache.image(for: try request("/me/avatar"), withAdditionalIdentifier: nil), "the signed-out user's image was put back")
        XCTAssertNotNil(cache.image(for: try request("/other"), withAdditionalIdentifier: nil), "a download started after is cached")

        // Nor does a request made after the cache was emptied join a download from before it
        // (whose image its handlers would be given).
        let before = try downloader.downloadImage(for: request("/slow"), success: nil, failure: nil)
        cache.removeAllImages()
        let after = try downloader.downloadImage(for: request("/slow"), success: nil, failure: nil)
        XCTAssertFalse(before?.task === after?.task, "a transfer of its own")
        await shutDown(downloader)
    }

    /// The same with the thumbnail serializer inside a `CompoundResponseSerializer` (as
    /// AFNetworking's users set it up): its variant was not found, so its thumbnails were
    /// stored under the plain key and the full-size downloader was given one, without asking.
    func testAThumbnailSerializerInACompoundKeepsItsVariant() async throws {
        let photo = try TestImages.image(width: 64, height: 64, value: 200).pngData()
        server.route("/photo.png", response: TestResponse(status: 200, headers: [("Content-Type", "image/png")], body: photo))
        let shared = AutoPurgingImageCache()
        let compound = decodingDownloader(maximumPixelSize: 8, inCompound: true, cache: shared)
        let fullSize = decodingDownloader(maximumPixelSize: nil, cache: shared)
        let thumbnails = decodingDownloader(maximumPixelSize: 8, cache: shared)
        let thumbnail = try await loadPhoto(compound)
        let full = try await loadPhoto(fullSize)
        XCTAssertEqual([thumbnail.width, full.width], [8, 64], "the full-size downloader was given the thumbnail")
        let plainThumbnail = try await loadPhoto(thumbnails)
        XCTAssertEqual(plainThumbnail.width, 8)
        XCTAssertEqual(server.requestCount("/photo.png"), 2, "one variant, one entry, whichever serializer made it")
        for downloader in [compound, fullSize, thumbnails] { await shutDown(downloader) }
    }

    /// A downloader decoding to `maximumPixelSize` at `scale` (its serializer alone, or inside
    /// a compound), storing in `cache`.
    private func decodingDownloader(
        maximumPixelSize: Int?, scale: Double = 1, inCompound: Bool = false, cache: AutoPurgingImageCache
    ) -> ImageDownloader {
        let manager = HTTPSessionManager(baseURL: nil)
        var serializer = ImageResponseSerializer()
        serializer.maximumPixelSize = maximumPixelSize
        serializer.imageScale = scale
        if inCompound {
            manager.responseSerializer = CompoundResponseSerializer(responseSerializers: [serializer])
        } else {
            manager.responseSerializer = serializer
        }
        return ImageDownloader(sessionManager: manager, imageCache: cache)
    }

    /// `/photo.png` through `downloader`.
    private func loadPhoto(_ downloader: ImageDownloader) async throws -> Image {
        let url = try server.url("/photo.png")
        return try await withCheckedThrowingContinuation { continuation in
            downloader.downloadImage(
                for: URLRequest(url: url), success: { _, _, image in continuation.resume(returning: image) },
                failure: { _, _, error in continuation.resume(throwing: error) })
        }
    }

    /// Requests whose cache policies want different things are not merged into one transfer:
    /// a request that may load does not join one that may only read the HTTP cache (whose
    /// failure would be its answer), and a reload does not join a transfer the HTTP cache
    /// answered with what it had stored. The completion queue is held so that each second
    /// request finds the first still listed.
    func testRequestsWhoseCachePoliciesDifferAreNotMerged() async throws {
        let versions = Mutex(0)
        let first = try TestImages.image(width: 2, height: 2, value: 1)
        let second = try TestImages.image(width: 2, height: 2, value: 2)
        server.route("/versioned") { _ in
            let version = versions.withLock { count -> Int in
                count += 1
                return count
            }
            var response = TestImages.response(version == 1 ? first : second)
            response.headers.append(("Cache-Control", "max-age=600"))
            return response
        }
        var configuration = SessionConfiguration.default
        configuration.responseCache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 0)
        let manager = HTTPSessionManager(baseURL: nil, configuration: configuration)
        manager.responseSerializer = RawImageSerializer()
        let held = DispatchQueue(label: "image-downloader-tests.held-completions")
        manager.completionQueue = held
        let downloader = ImageDownloader(sessionManager: manager, imageCache: nil)
        let url = try server.url("/versioned")
        func request(_ policy: URLRequest.CachePolicy, at target: URL? = nil) -> URLRequest {
            var request = URLRequest(url: target ?? url)
            request.cachePolicy = policy
            return request
        }
        let outcomes = Recorder<String>()
        func record(_ name: String) -> (ImageDownloader.SuccessHandler, ImageDownloader.FailureHandler) {
            ({ _, _, image in outcomes.append("\(name): \(image.pixels.first ?? 0)") },
             { _, _, error in outcomes.append("\(name): \((error as? SessionError) == .resourceNotCached ? "not cached" : "\(error)")") })
        }
        // Held until both requests of a round are made: the first one's completion waits.
        func round(_ firstPolicy: URLRequest.CachePolicy, _ firstName: String,
                   _ secondPolicy: URLRequest.CachePolicy, _ secondName: String, at target: URL? = nil) async throws {
            let gate = DispatchSemaphore(value: 0)
            held.async { gate.wait() }
            let (firstSuccess, firstFailure) = record(firstName)
            let (secondSuccess, secondFailure) = record(secondName)
            let count = outcomes.count
            downloader.downloadImage(for: request(firstPolicy, at: target), success: firstSuccess, failure: firstFailure)
            downloader.downloadImage(for: request(secondPolicy, at: target), success: secondSuccess, failure: secondFailure)
            gate.signal()
            try await eventually({ outcomes.count == count + 2 }, "both delivered")
        }
        // Nothing stored yet: the cache-only request fails; the other one loads the first version.
        try await round(.returnCacheDataDontLoad, "cache only", .useProtocolCachePolicy, "may load")
        XCTAssertEqual(Set(outcomes.values), ["cache only: not cached", "may load: 1"], "the request that may load was given the cache-only request's failure")
        // Now stored and fresh: the default answer is the stored first version, the reload's the
        // server's second.
        try await round(.useProtocolCachePolicy, "default", .reloadIgnoringLocalCacheData, "reload")
        XCTAssertEqual(Set(outcomes.values.suffix(2)), ["default: 1", "reload: 2"], "the reload was given the stored image")
        XCTAssertEqual(versions.withLock { $0 }, 2)

        // Stored but to be revalidated each time (`no-cache`): the default policy asks the
        // server and gets its new image, a cache-first request takes the stored one. Merged,
        // the cache-first request was given the transfer the other started.
        let revalidations = RequestCounter()
        server.route("/revalidated") { _ in
            let version = revalidations.next()
            var response = TestImages.response(version == 1 ? first : second)
            response.headers.append(("Cache-Control", "no-cache"))
            response.headers.append(("ETag", "\"v\(version)\""))  // the image changed at each request
            // The revalidation is answered late, so the cache-first request reads the cache
            // while it is under way (not after it stored the new image).
            if version > 1 { response.delayBeforeHead = .seconds(1) }
            return response
        }
        let revalidated = try server.url("/revalidated")
        try await round(.useProtocolCachePolicy, "stored", .useProtocolCachePolicy, "stored too", at: revalidated)
        try await round(.useProtocolCachePolicy, "default", .returnCacheDataElseLoad, "cache first", at: revalidated)
        XCTAssertEqual(Set(outcomes.values.suffix(2)), ["default: 2", "cache first: 1"], "the cache-first request joined a revalidation")
        await shutDown(downloader)
    }

    /// A conditional, range or cache-directive request is merged only with its like: a 304 or
    /// a 206 answering one is no image for a plain request, and a plain request's image is no
    /// answer to `If-None-Match`.
    func testTheMergeKeyTellsConditionalAndRangeRequestsApart() throws {
        let url = try server.url("/fast")
        func key(_ fields: [String: String]) -> String {
            var request = URLRequest(url: url)
            for (name, value) in fields { request.setValue(value, forHTTPHeaderField: name) }
            return ImageRequestKey.mergeKey(for: request, url: url)
        }
        let plain = key([:])
        for fields in [["If-None-Match": "\"a\""], ["If-Modified-Since": "Sun, 01 Nov 2026 00:00:00 GMT"], ["Range": "bytes=0-9"],
                       ["Cache-Control": "no-cache"], ["Pragma": "no-cache"]] {
            XCTAssertNotEqual(key(fields), plain, "\(fields)")
            XCTAssertEqual(key(fields), key(fields), "the same fields merge")
        }
        XCTAssertNotEqual(key(["If-None-Match": "\"a\""]), key(["If-None-Match": "\"b\""]))
    }

    func testARequestWithoutURLFailsWithBadURL() async throws {
        let downloader = TestImages.downloader()
        var request = URLRequest(url: try server.url("/fast"))
        request.url = nil
        let errors = Recorder<URLError.Code>()
        let receipt = downloader.downloadImage(for: request, failure: { _, response, error in
            XCTAssertNil(response)
            errors.append((error as? URLError)?.code ?? .unknown)
        })
        XCTAssertNil(receipt)
        try await eventually({ errors.count == 1 }, "failure called")
        XCTAssertEqual(errors.values, [.badURL])
        await shutDown(downloader)
    }

    func testFailuresCarryTheResponseAndReachEveryMergedReceipt() async throws {
        let downloader = TestImages.downloader()
        let statuses = Recorder<Int>()
        for _ in 0..<2 {
            downloader.downloadImage(for: try request("/missing"), success: { _, _, _ in XCTFail("no image") }, failure: { _, response, _ in
                statuses.append(response?.statusCode ?? -1)
            })
        }
        try await eventually({ statuses.count == 2 }, "both told")
        XCTAssertEqual(statuses.values, [404, 404])
        XCTAssertNil(downloader.imageCache?.image(for: try request("/missing"), withAdditionalIdentifier: nil))
        await shutDown(downloader)
    }

    func testHandlersRunOnTheCompletionQueue() async throws {
        let downloader = TestImages.downloader()
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "image-downloader-tests.completion")
        queue.setSpecific(key: key, value: "completion")
        downloader.sessionManager.completionQueue = queue
        let seen = Recorder<String?>()
        let onQueue: ImageDownloader.SuccessHandler = { _, _, _ in seen.append(DispatchQueue.getSpecific(key: key)) }
        downloader.downloadImage(for: try request("/fast"), success: onQueue)
        try await eventually({ seen.count == 1 }, "downloaded")
        downloader.downloadImage(for: try request("/fast"), success: onQueue)  // from the cache
        var noURL = try request("/fast")
        noURL.url = nil
        downloader.downloadImage(for: noURL, failure: { _, _, _ in seen.append(DispatchQueue.getSpecific(key: key)) })
        try await eventually({ seen.count == 3 }, "cache hit and bad URL")
        XCTAssertEqual(seen.values, ["completion", "completion", "completion"])
        await shutDown(downloader)
    }

    func testAResponseThatIsNotAnImageFailsClearly() async throws {
        let manager = HTTPSessionManager(baseURL: nil)
        manager.responseSerializer = HTTPResponseSerializer()
        let downloader = ImageDownloader(sessionManager: manager)
        let errors = Recorder<String>()
        downloader.downloadImage(for: try request("/fast"), failure: { _, _, error in errors.append("\(error)") })
        try await eventually({ errors.count == 1 }, "failed")
        XCTAssertEqual(errors.values.first?.contains("not an Image"), true, "\(errors.values)")
        await shutDown(downloader)
    }

    func testACredentialAnswersBasicChallenges() async throws {
        // Bound to the server's origin: an unbound credential is never sent over http (issue
        // 19, #10; see ImageDownloaderCredentialTests).
        let secured = try TestServer { [picture] request in
            let expected = "Basic " + Data("user:secret".utf8).base64EncodedString()
            if request.header("Authorization") == expected { return TestImages.response(picture!) }
            return TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"images\"")], body: Data())
        }
        defer { secured.shutdown() }
        let downloader = TestImages.downloader(cache: nil)
        let outcomes = Recorder<Int>()
        let url = try secured.url("/private.png")
        downloader.downloadImage(for: URLRequest(url: url), success: { _, _, _ in outcomes.append(200) },
                                 failure: { _, response, _ in outcomes.append(response?.statusCode ?? -1) })
        try await eventually({ outcomes.count == 1 }, "without a credential")
        try downloader.setCredential(URLCredential(user: "user", password: "secret", persistence: .none), for: url)
        downloader.downloadImage(for: URLRequest(url: url), success: { _, _, _ in outcomes.append(200) },
                                 failure: { _, response, _ in outcomes.append(response?.statusCode ?? -1) })
        try await eventually({ outcomes.count == 2 }, "with a credential")
        try downloader.setCredential(URLCredential(user: "user", password: "wrong", persistence: .none), for: url)
        downloader.downloadImage(for: URLRequest(url: url), success: { _, _, _ in outcomes.append(200) },
                                 failure: { _, response, _ in outcomes.append(response?.statusCode ?? -1) })
        try await eventually({ outcomes.count == 3 }, "with a wrong credential")
        XCTAssertEqual(outcomes.values, [401, 200, 401])
        XCTAssertEqual(secured.requests.count, 1 + 2 + 2, "a wrong credential is tried once, not in a loop")
        await shutDown(downloader)
    }

    func testTheDefaultInstanceIsAFImageDownloadersSetup() {
        let downloader = ImageDownloader.defaultInstance
        XCTAssertTrue(downloader.sessionManager.responseSerializer is ImageResponseSerializer)
        XCTAssertEqual(downloader.downloadPrioritization, .fifo)
        XCTAssertEqual(downloader.maximumActiveDownloads, 4)
        XCTAssertTrue(downloader.imageCache is AutoPurgingImageCache)
        XCTAssertEqual(ImageDownloader(maximumActiveDownloads: 0, imageCache: nil).maximumActiveDownloads, 1)
    }

    func testAQueuedDownloadPostsTaskDidResumeWhenItStarts() async throws {
        let downloader = TestImages.downloader(maximumActiveDownloads: 1, cache: nil)
        downloader.downloadImage(for: try request("/slow"))
        let queued = try XCTUnwrap(downloader.downloadImage(for: try request("/a")))
        XCTAssertEqual(queued.task.state, .suspended, "waiting for the slot")
        let resumed = expectation(forNotification: .taskDidResume, object: queued.task)
        await fulfillment(of: [resumed], timeout: 30)
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "both done")
        await shutDown(downloader)
    }

    func testConcurrentRequestsAndCancelsAnswerEveryHandlerOnce() async throws {
        let downloader = TestImages.downloader(maximumActiveDownloads: 2, cache: nil)
        let urls = try ["a", "b", "c", "d", "fast"].map { try server.url("/\($0)") }
        // (cancelled by the caller?, outcome) per receipt.
        let answers = Recorder<(Bool, String)>()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for index in 0..<25 {
                let cancels = index % 2 == 0
                let receipt = downloader.downloadImage(
                    for: URLRequest(url: urls[(worker + index) % urls.count]),
                    success: { _, _, _ in answers.append((cancels, "image")) },
                    failure: { _, _, error in
                        answers.append((cancels, (error as? SessionError) == .cancelled ? "cancelled" : "\(error)"))
                    })
                if cancels, let receipt { downloader.cancelTask(for: receipt) }
            }
        }
        try await eventually({ answers.count == 200 }, "every handler answered")
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(answers.count, 200, "and only once")
        let kept = answers.values.filter { !$0.0 }.map(\.1)
        let withdrawn = answers.values.filter { $0.0 }.map(\.1)
        XCTAssertEqual(kept, [String](repeating: "image", count: 8 * 12), "a kept receipt always gets its image")
        // A withdrawn receipt fails with .cancelled, unless its transfer had already delivered
        // (a join in the instant the transfer finished): never any other outcome.
        XCTAssertEqual(withdrawn.count, 8 * 13)
        XCTAssertEqual(Set(withdrawn).subtracting(["cancelled", "image"]), [])
        XCTAssertGreaterThan(withdrawn.filter { $0 == "cancelled" }.count, 0)
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "nothing left, no slot leaked")
        await shutDown(downloader)
    }

    func testAReleasedDownloaderCancelsItsTransfersAndLeavesNothing() async throws {
        var downloader: ImageDownloader? = TestImages.downloader()
        weak let weakDownloader = downloader
        let receipt = try XCTUnwrap(downloader?.downloadImage(for: try request("/slow")))
        let manager = try XCTUnwrap(downloader?.sessionManager)
        downloader = nil
        XCTAssertNil(weakDownloader, "no task keeps the downloader alive")
        try await eventually({ receipt.task.state == .completed }, "its transfer ends")
        XCTAssertEqual(receipt.task.error as? SessionError, .cancelled)
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }

    func testAReleasedDownloaderFailsEveryWaitingReceiptOnceWithCancelled() async throws {
        // One transfer at a time: /slow runs with two merged receipts, /a waits in line.
        var downloader: ImageDownloader? = TestImages.downloader(maximumActiveDownloads: 1)
        let manager = try XCTUnwrap(downloader?.sessionManager)
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "image-downloader-tests.release")
        queue.setSpecific(key: key, value: "completion")
        manager.completionQueue = queue
        let outcomes = Recorder<String>()
        for (path, name) in [("/slow", "slow-1"), ("/slow", "slow-2"), ("/a", "a")] {
            downloader?.downloadImage(
                for: try request(path),
                success: { _, _, _ in outcomes.append("\(name) success") },
                failure: { request, _, error in
                    let onQueue = DispatchQueue.getSpecific(key: key) == "completion"
                    let cancelled = (error as? SessionError) == .cancelled
                    outcomes.append("\(name) \(request.url?.path ?? "?") cancelled=\(cancelled) onQueue=\(onQueue)")
                })
        }
        XCTAssertEqual(downloader?.pendingDownloadCount.waiting, 1)
        downloader = nil
        try await eventually({ outcomes.count == 3 }, "every receipt was told")
        // The cancelled transfer's own completion must not answer anyone a second time.
        try await eventually({ manager.tasks.isEmpty }, "the transfers ended")
        queue.sync {}
        XCTAssertEqual(outcomes.values.sorted(), [
            "a /a cancelled=true onQueue=true",
            "slow-1 /slow cancelled=true onQueue=true",
            "slow-2 /slow cancelled=true onQueue=true",
        ])
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
    }
}
