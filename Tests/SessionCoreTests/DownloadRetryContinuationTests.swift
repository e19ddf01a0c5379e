import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The retrier meets a download cut off mid-body: the retry continues the bytes already in
/// the file (`Range` with `If-Range`) rather than asking for the whole body again, and a retry
/// that fails before adding to them — no answer, or an error status — leaves those bytes and
/// resume data for them, never an empty hand.
final class DownloadRetryContinuationTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!
    var downloads: URL!
    var destination: URL!

    override func setUp() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-dlretry-\(UUID().uuidString)")
        downloads = root.appendingPathComponent("partial")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        destination = root.appendingPathComponent("file")
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = downloads
        manager = URLSessionManager(configuration: configuration)
        server = try TestServer()
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        server.shutdown()
        try? FileManager.default.removeItem(at: downloads.deletingLastPathComponent())
    }

    /// A retrier that retries the first failure once, after the route's file changed to `new`
    /// (entity tag "v2"; sent gzipped when `gzipped` is given), `before` run first.
    private static func retryingOnce(
        changing route: RangeFileRoute, to new: Data, gzipped: Data? = nil, before: @escaping @Sendable () -> Void = {}
    ) -> RecordingRetrier {
        RecordingRetrier { attempt, _ in
            before()
            route.state.withLock {
                $0.body = new
                $0.entityTag = "\"v2\""
                $0.gzippedBody = gzipped
            }
            return attempt < 1 ? .retry : .doNotRetry
        }
    }

    private var leftovers: [String] { (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [] }

    /// Runs a download of `request` to `destination` and returns the task and its response.
    private func download(_ request: URLRequest) async -> (DownloadTask, DataResponse) {
        await run { manager, destination, done in
            manager.downloadTask(with: request, destination: { _, _ in destination }, completionHandler: done)
        }
    }

    /// Runs a download made from `resumeData` to `destination`.
    private func download(resumingFrom resumeData: Data) async -> (DownloadTask, DataResponse) {
        await run { manager, destination, done in
            manager.downloadTask(withResumeData: resumeData, destination: { _, _ in destination }, completionHandler: done)
        }
    }

    private func run(
        _ make: (URLSessionManager, URL, @escaping @Sendable (DataResponse) -> Void) -> DownloadTask
    ) async -> (DownloadTask, DataResponse) {
        let box = Mutex<DownloadTask?>(nil)
        let response = await withCheckedContinuation { continuation in
            let task = make(manager, destination) { continuation.resume(returning: $0) }
            box.withLock { $0 = task }
            task.resume()
        }
        return (box.withLock { $0 }!, response)
    }

    /// A retrier that sends the request again `times` times, whatever ended the attempt.
    private func retrying(_ times: Int) -> RecordingRetrier {
        RecordingRetrier { attempt, _ in attempt < times ? .retry : .doNotRetry }
    }

    /// A 206's body is checked against its `Content-Range`: a chunked one that ends short is
    /// a lost connection, not a finished file (it was moved into place, 300 of 1,000 bytes),
    /// and the retrier hears of it (the rest is asked for); one that runs long is refused (the
    /// extra bytes were kept). libcurl checks a `Content-Length` only. A range near
    /// `Int64.max` that runs long is refused before a byte is written (it was retried from
    /// where it was cut, and the next `Range:` overflowed and stopped the process).
    func testAPartialAnswerIsCheckedAgainstItsContentRange() async throws {
        func partial(_ contentRange: String, sending count: Int, framing: TestResponse.Framing = .chunked) -> TestResponse {
            var response = TestResponse(
                status: 206, headers: [("Content-Range", contentRange), ("ETag", "\"x\""), ("Content-Type", "application/octet-stream")])
            response.body = .stream([TestResponse.Chunk(patternedData(count: count), delay: .zero)])
            response.framing = framing
            return response
        }
        server.route("/short", response: partial("bytes 0-999/2000", sending: 300))
        server.route("/long", response: partial("bytes 0-99/2000", sending: 300))
        var huge = partial("bytes 9223372036854775000-9223372036854775806/9223372036854775807", sending: 1000, framing: .contentLength)
        huge.headers.append(("Content-Length", "2000"))
        huge.ending = .close
        server.route("/huge", response: huge)
        manager.requestRetrier = retrying(1)
        for (path, expected) in [("/short", "networkLost"), ("/long", "badServerResponse"), ("/huge", "badServerResponse")] {
            var request = URLRequest(url: try server.url(path))
            request.setValue("bytes=0-999", forHTTPHeaderField: "Range")
            let (_, response) = await download(request)
            let error = try XCTUnwrap(response.error as? SessionError, path)
            switch (error, expected) {
            case (.networkLost, "networkLost"), (.badServerResponse, "badServerResponse"): break
            default: XCTFail("\(path): \(error)")
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path), path)
        }
        let short = server.requests.filter { $0.uri == "/short" }
        XCTAssertGreaterThan(short.count, 1, "the short answer was retried")
        XCTAssertEqual(short.dropFirst().first?.header("Range"), "bytes=300-999", "the retry asks for the rest")
        XCTAssertEqual(short.dropFirst().first?.header("If-Range"), "\"x\"")
    }

    /// A 206 that sends more than its `Content-Range` (a proxy streaming the whole body for a
    /// range) vouches for none of its bytes: a retry does not continue them but starts over.
    /// It used to end as a success, the extra bytes in the file; once the overrun was refused,
    /// the first fix still continued its bytes on the retry.
    func testAPartialAnswerThatRunsLongIsNotContinued() async throws {
        let body = patternedData(count: 200_000)
        let served = RequestCounter()
        server.route("/overrun") { _ in
            if served.next() == 1 {
                // Announces bytes 0-99999 and sends the whole body.
                var response = TestResponse(
                    status: 206, headers: [("Content-Range", "bytes 0-99999/200000"), ("ETag", "\"v1\""), ("Content-Type", "application/octet-stream")])
                response.body = .stream(stride(from: 0, to: body.count, by: 20_000).map {
                    TestResponse.Chunk(body.subdata(in: $0..<($0 + 20_000)), delay: .milliseconds(5))
                })
                response.framing = .chunked
                return response
            }
            return TestResponse(status: 200, headers: [("ETag", "\"v1\"")], body: body)
        }
        manager.requestRetrier = RecordingRetrier { attempt, error in
            attempt == 0 && error.map { if case .badServerResponse = $0 { return true } else { return false } } == true ? .retry : .doNotRetry
        }
        let (_, response) = await download(URLRequest(url: try server.url("/overrun")))
        XCTAssertNil(response.error)
        let requests = server.requests.filter { $0.uri == "/overrun" }
        XCTAssertEqual(requests.count, 2)
        XCTAssertNil(requests.last?.header("Range"), "the overrun's bytes were continued")
        XCTAssertEqual(try Data(contentsOf: destination), body)
    }

    func testARetriedDownloadContinuesTheBytesItAlreadyHas() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body)
        route.state.withLock { $0.faults = [.cutAfter(120_000)] }
        let resumed = Mutex<[Int64]>([])
        manager.setDownloadTaskDidResumeBlock { _, offset, _ in resumed.withLock { $0.append(offset) } }
        let written = Mutex<Int64>(0)
        manager.setDownloadTaskDidWriteDataBlock { _, delta, _, _ in written.withLock { $0 += delta } }
        let retrier = retrying(1)
        manager.requestRetrier = retrier

        let (task, response) = await download(URLRequest(url: try server.url("/file")))

        XCTAssertNil(response.error)
        XCTAssertEqual(retrier.asked.withLock { $0 }, ["0 networkLost"])
        let requests = route.rangeRequests
        XCTAssertEqual(requests.count, 2)
        XCTAssertNil(requests.first?.range, "the first attempt asks for the whole body")
        XCTAssertEqual(requests.last?.range, "bytes=120000-", "the retry asks for the rest")
        XCTAssertEqual(requests.last?.ifRange, "\"v1\"", "only if the file is still the one the bytes came from")
        XCTAssertEqual(response.response?.statusCode, 206)
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(task.countOfBytesReceived, Int64(body.count), "progress counts the whole file")
        XCTAssertEqual(task.countOfBytesExpectedToReceive, Int64(body.count))
        XCTAssertEqual(resumed.withLock { $0 }, [120_000], "the resume hook hears where the file continues")
        try await eventually({ written.withLock { $0 } == Int64(body.count) }, "the written-data hook hears of every byte once")
        XCTAssertEqual(leftovers, [])
    }

    /// The file changed between the attempts and the server answers `If-Range` with the whole
    /// new body gzipped, whatever was asked (a range goes without `Accept-Encoding`, so libcurl
    /// does not decode it). The coded bytes were saved as the file; the request goes again
    /// without the range, where libcurl decodes, and the file is the new body.
    func testAChangedFileSentGzippedToARetryIsDecoded() async throws {
        let old = patternedData(count: 200_000)
        let new = Data((0..<150_000).map { UInt8(truncatingIfNeeded: $0 / 97) })
        let gzipped = try Gzip.compress(new)
        let route = RangeFileRoute(server: server, path: "/file", body: old)
        route.state.withLock { $0.faults = [.cutAfter(80_000)] }
        manager.requestRetrier = Self.retryingOnce(changing: route, to: new, gzipped: gzipped)

        let (_, response) = await download(URLRequest(url: try server.url("/file")))

        XCTAssertNil(response.error)
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(route.rangeRequests.map(\.range), [nil, "bytes=80000-", nil], "asked again without the range")
        // A range asks for the bytes as they are: without the field any coding is acceptable.
        XCTAssertEqual(server.requests.filter { $0.header("Range") != nil }.map { $0.header("Accept-Encoding") }, ["identity"])
        XCTAssertEqual(try Data(contentsOf: destination), new, "the decoded body, not the gzip bytes")
        XCTAssertEqual(leftovers, [])
    }

    /// The first chunk is written only in part (a full disk: `RLIMIT_FSIZE`), a retrier retries
    /// the write failure, and the answer is a changed, shorter file from byte 0: the bytes the
    /// failed chunk left must go. The file's length was counted only after whole chunks, so
    /// nothing was cut and the old tail stayed after the new body.
    func testBytesOfAFailedWriteGoWhenARetryStartsTheFileOver() async throws {
        var saved = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved), 0)
        let previousHandler = signal(SIGXFSZ, SIG_IGN)
        var limit = saved
        limit.rlim_cur = 1_000
        defer {
            _ = setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
            signal(SIGXFSZ, previousHandler)
        }
        let old = patternedData(count: 100_000)
        let new = patternedData(count: 300, seed: 9)
        let route = RangeFileRoute(server: server, path: "/file", body: old)
        let original = saved
        let retrier = Self.retryingOnce(changing: route, to: new) {
            var restored = original
            _ = setrlimit(Int32(RLIMIT_FSIZE.rawValue), &restored)
        }
        manager.requestRetrier = retrier
        XCTAssertEqual(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit), 0)

        let (_, response) = await download(URLRequest(url: try server.url("/file")))

        XCTAssertNil(response.error)
        XCTAssertEqual(retrier.asked.withLock { $0 }.map { $0.hasPrefix("0 fileWriteFailed") }, [true])
        XCTAssertEqual(try Data(contentsOf: destination), new, "no byte of the old file is left after the new one")
        XCTAssertEqual(leftovers, [])
    }

    /// The file changed between the attempts: the server answers `If-Range` with the whole new
    /// body, which replaces the old bytes.
    func testARetryAnsweredWithAChangedFileStartsOver() async throws {
        let old = patternedData(count: 200_000)
        let new = patternedData(count: 250_000, seed: 7)
        let route = RangeFileRoute(server: server, path: "/file", body: old)
        route.state.withLock { $0.faults = [.cutAfter(80_000)] }
        manager.requestRetrier = Self.retryingOnce(changing: route, to: new)

        let (_, response) = await download(URLRequest(url: try server.url("/file")))

        XCTAssertNil(response.error)
        XCTAssertEqual(route.rangeRequests.last?.ifRange, "\"v1\"")
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(try Data(contentsOf: destination), new, "no old byte is left in the file")
    }

    /// The retry fails before any answer: the task fails, but with resume data for the bytes
    /// the first attempt wrote, and they are still in the file.
    func testARetryThatGetsNoAnswerKeepsTheBytesAndTheirResumeData() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body)
        route.state.withLock { $0.faults = [.cutAfter(100_000), .closeWithoutAnswer] }
        let retrier = retrying(1)
        manager.requestRetrier = retrier

        let (task, response) = await download(URLRequest(url: try server.url("/file")))

        XCTAssertEqual(retrier.asked.withLock { $0 }, ["0 networkLost", "1 networkLost"])
        guard case .networkLost? = response.error as? SessionError else {
            return XCTFail("expected networkLost, got \(String(describing: response.error))")
        }
        let data = try XCTUnwrap(task.resumeData, "the bytes of the first attempt can be resumed")
        let resume = try DownloadResumeData(encoded: data)
        XCTAssertEqual(resume.bytesReceived, 100_000)
        XCTAssertEqual(resume.entityTag, "\"v1\"")
        XCTAssertEqual(resume.expectedLength, 300_000)
        XCTAssertEqual(try Data(contentsOf: resume.partialFileURL), body.prefix(100_000))

        // The resume data finishes the download with the rest only.
        let (_, finished) = await download(resumingFrom: data)
        XCTAssertNil(finished.error)
        XCTAssertEqual(route.rangeRequests.last?.range, "bytes=100000-")
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(leftovers, [])
    }

    /// The retry is answered with an error status: its body never touches the file, and the
    /// task fails with `resumeFailed` carrying resume data for the bytes already there — as a
    /// download made from resume data does.
    func testARetryAnsweredWithAnErrorKeepsTheBytes() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body)
        route.state.withLock { $0.faults = [.cutAfter(64_000)] }
        let retrier = RecordingRetrier { attempt, _ in
            route.state.withLock { $0.errorStatus = 503 }
            return attempt < 2 ? .retry : .doNotRetry
        }
        manager.requestRetrier = retrier

        let (task, response) = await download(URLRequest(url: try server.url("/file")))

        XCTAssertEqual(retrier.asked.withLock { $0 }, ["0 networkLost", "1 response", "2 response"])
        XCTAssertEqual(route.rangeRequests.dropFirst().map(\.range), ["bytes=64000-", "bytes=64000-"])
        guard case .resumeFailed(statusCode: 503, resumeData: let carried?)? = response.error as? SessionError else {
            return XCTFail("expected resumeFailed(503) with resume data, got \(String(describing: response.error))")
        }
        XCTAssertEqual(task.resumeData, carried)
        let resume = try DownloadResumeData(encoded: carried)
        XCTAssertEqual(resume.bytesReceived, 64_000)
        XCTAssertEqual(try Data(contentsOf: resume.partialFileURL), body.prefix(64_000), "no error page in the file")
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path))
    }

    /// Validators by date: the first answer's strong `Last-Modified` vouches for the bytes the
    /// continuation's 206 appends, though that 206 carries no `Date` to judge a date by. A third
    /// attempt answered 503 then leaves resume data for all of them. Until the review of
    /// 2026-11-28, the appended bytes were "not vouched for": the file was kept in a state that
    /// held more than its resume point, and the 503 removed it with no resume data.
    func testBytesAppendedUnderADateValidatorStayVouchedFor() async throws {
        let body = patternedData(count: 300_000)
        let modified = "Tue, 24 Nov 2026 10:00:00 GMT"
        let ranges = Mutex<[String?]>([])
        server.route("/dated") { request in
            let range = request.header("Range")
            let count = ranges.withLock { $0.append(range); return $0.count }
            switch count {
            case 1:
                var cut = TestResponse(
                    status: 200,
                    headers: [("Last-Modified", modified), ("Date", "Wed, 25 Nov 2026 10:00:00 GMT"),
                              ("Content-Length", String(body.count))],
                    body: .data(body.prefix(100_000)), framing: .contentLength, ending: .close)
                cut.keepAlive = false
                return cut
            case 2:
                var cut = TestResponse(
                    status: 206,
                    headers: [("Content-Range", "bytes 100000-299999/300000"), ("Content-Length", "200000")],
                    body: .data(body.subdata(in: 100_000..<150_000)), framing: .contentLength, ending: .close)
                cut.keepAlive = false
                return cut
            default:
                return TestResponse(status: 503, body: Data("busy".utf8))
            }
        }
        manager.requestRetrier = retrying(2)

        let (task, response) = await download(URLRequest(url: try server.url("/dated")))

        XCTAssertEqual(ranges.withLock { $0 }, [nil, "bytes=100000-", "bytes=150000-"])
        XCTAssertEqual(server.requests.dropFirst().first?.header("If-Range"), modified)
        guard case .resumeFailed(statusCode: 503, resumeData: let carried?)? = response.error as? SessionError else {
            return XCTFail("expected resumeFailed(503) with resume data, got \(String(describing: response.error))")
        }
        XCTAssertEqual(task.resumeData, carried)
        let resume = try DownloadResumeData(encoded: carried)
        XCTAssertEqual(resume.bytesReceived, 150_000)
        XCTAssertEqual(resume.lastModified, modified)
        XCTAssertEqual(try Data(contentsOf: resume.partialFileURL), body.prefix(150_000))
    }

    /// Bytes no validator vouches for (no `ETag`, no `Last-Modified`) cannot be continued: the
    /// retry asks for the whole body again, and gets it.
    func testARetryWithoutAValidatorAsksForTheWholeBody() async throws {
        let body = patternedData(count: 200_000)
        let cut = Mutex(true)
        let ranges = Mutex<[String?]>([])
        server.route("/plain") { request in
            let range = request.headers.first { $0.name.lowercased() == "range" }?.value
            ranges.withLock { $0.append(range) }
            let first = cut.withLock { value in defer { value = false }; return value }
            guard first else { return TestResponse(status: 200, body: body) }
            var response = TestResponse(
                status: 200, headers: [("Content-Length", String(body.count))], body: .data(body.prefix(50_000)),
                framing: .contentLength, ending: .close)
            response.keepAlive = false
            return response
        }
        manager.requestRetrier = retrying(1)

        let (_, response) = await download(URLRequest(url: try server.url("/plain")))

        XCTAssertNil(response.error)
        XCTAssertEqual(ranges.withLock { $0 }, [nil, nil], "no range is asked for without a validator")
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(try Data(contentsOf: destination), body)
    }

    // MARK: - The continuation meets the other features

    /// The idle timeout ends the attempt mid-body (the server stalls after 120,000 bytes):
    /// the retry continues from there, as after a lost connection.
    func testARetryAfterTheIdleTimeoutContinuesTheBytes() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body)
        route.state.withLock { $0.faults = [.stallAfter(120_000)] }
        let retrier = retrying(1)
        manager.requestRetrier = retrier
        var request = URLRequest(url: try server.url("/file"))
        request.timeoutInterval = 1

        let (_, response) = await download(request)

        XCTAssertNil(response.error)
        XCTAssertEqual(retrier.asked.withLock { $0 }, ["0 timedOut"])
        XCTAssertEqual(route.rangeRequests.last?.range, "bytes=120000-")
        XCTAssertEqual(route.rangeRequests.last?.ifRange, "\"v1\"")
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(leftovers, [])
    }

    /// The caller asked for a range of the file (from byte 1,000; from 1,000 to 200,999): the
    /// retry continues within it, from the caller's first byte plus what arrived, up to the
    /// caller's last byte (for the open range, the last the 206's `Content-Range` named). The
    /// file holds the caller's range, nothing before or after it.
    func testARetryContinuesWithinTheCallersRange() async throws {
        let body = patternedData(count: 300_000)
        for (asked, last) in [("bytes=1000-", 299_999), ("bytes=1000-200999", 200_999)] {
            let route = RangeFileRoute(server: server, path: "/file", body: body)
            route.state.withLock { $0.faults = [.cutAfter(50_000)] }
            manager.requestRetrier = retrying(1)
            var request = URLRequest(url: try server.url("/file"))
            request.setValue(asked, forHTTPHeaderField: "Range")
            try? FileManager.default.removeItem(at: destination)

            let (_, response) = await download(request)

            XCTAssertNil(response.error, asked)
            XCTAssertEqual(route.rangeRequests.map(\.range), [asked, "bytes=51000-\(last)"], asked)
            XCTAssertEqual(route.rangeRequests.last?.ifRange, "\"v1\"", asked)
            XCTAssertEqual(response.response?.statusCode, 206, asked)
            XCTAssertEqual(try Data(contentsOf: destination), body.subdata(in: 1000..<(last + 1)), asked)
        }
        XCTAssertEqual(leftovers, [])
    }

    /// The request is redirected to the file: the retry goes through the redirect again and
    /// continues the bytes at its target.
    func testARetryThroughARedirectContinuesAtTheTarget() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body)
        route.state.withLock { $0.faults = [.cutAfter(120_000)] }
        server.route("/start", response: .redirect(to: "/file"))
        manager.requestRetrier = retrying(1)

        let (_, response) = await download(URLRequest(url: try server.url("/start")))

        XCTAssertNil(response.error)
        XCTAssertEqual(route.rangeRequests.map(\.range), [nil, "bytes=120000-"])
        XCTAssertEqual(route.rangeRequests.last?.ifRange, "\"v1\"")
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(leftovers, [])
    }

    /// `cancel(byProducingResumeData:)` while the retry waits out its back-off: the resume
    /// data covers the bytes the cut attempt wrote, and a download made from it finishes the
    /// file with one range request.
    func testCancellingWithResumeDataDuringTheBackOffKeepsTheBytes() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body)
        route.state.withLock { $0.faults = [.cutAfter(120_000)] }
        let retrier = RecordingRetrier { attempt, _ in attempt < 1 ? .retryAfter(60) : .doNotRetry }
        manager.requestRetrier = retrier
        let box = Mutex<DownloadTask?>(nil)
        let finished = Mutex<DataResponse?>(nil)
        let task = manager.downloadTask(with: URLRequest(url: try server.url("/file")), destination: { [destination] _, _ in destination! }) { response in
            finished.withLock { $0 = response }
        }
        box.withLock { $0 = task }
        task.resume()
        try await eventually({ retrier.asked.withLock { $0 } == ["0 networkLost"] }, "the retrier was asked")

        let resumeData: Data? = await withCheckedContinuation { continuation in
            task.cancel(byProducingResumeData: { continuation.resume(returning: $0) })
        }

        let data = try XCTUnwrap(resumeData, "resume data for the bytes of the cut attempt")
        XCTAssertEqual(try DownloadResumeData(encoded: data).bytesReceived, 120_000)
        try await eventually({ finished.withLock { $0 } != nil }, "the task completed")
        XCTAssertEqual(route.rangeRequests.count, 1, "the retry was not sent")
        let (_, resumed) = await download(resumingFrom: data)
        XCTAssertNil(resumed.error)
        XCTAssertEqual(route.rangeRequests.last?.range, "bytes=120000-")
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(leftovers, [])
    }
}
