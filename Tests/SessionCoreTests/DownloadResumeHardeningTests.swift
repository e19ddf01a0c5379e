import CurlewTestSupport
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
@testable import SessionCore

/// A resumed download never loses the bytes it continues: an error answer, a refused range
/// answered by an error, or a failed write keep the partial file and leave resume data. A
/// caller's byte range survives resuming, and a finished file stays claimed until it left its
/// temporary path.
final class DownloadResumeHardeningTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!
    /// This test's download directory (temporary files) and a place for destinations.
    var downloads: URL!
    var destinations: URL!

    override func setUp() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-dlr-\(UUID().uuidString)")
        downloads = root.appendingPathComponent("partial")
        destinations = root.appendingPathComponent("done")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: destinations, withIntermediateDirectories: true)
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

    private var leftovers: [String] { (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [] }

    private func download(
        _ task: (@escaping @Sendable (DataResponse) -> Void) -> DownloadTask
    ) async -> (DownloadTask, DataResponse) {
        let box = Mutex<DownloadTask?>(nil)
        let response = await withCheckedContinuation { continuation in
            let made = task { continuation.resume(returning: $0) }
            box.withLock { $0 = made }
            made.resume()
        }
        return (box.withLock { $0 }!, response)
    }

    /// Starts `request` and cancels it for resume data once `bytes` arrived.
    private func cancelForResumeData(_ request: URLRequest, after bytes: Int64) async throws -> Data {
        let resumeData = Mutex<Data??>(nil)
        let task = manager.downloadTask(with: request, destination: nil) { _ in }
        task.resume()
        try await eventually({ task.countOfBytesReceived >= bytes }, "bytes arrive")
        task.cancel { data in resumeData.withLock { $0 = .some(data) } }
        try await eventually({ resumeData.withLock { $0 } != nil }, "resume data arrives")
        try await eventually({ task.state == .completed }, "the task completes")
        return try XCTUnwrap(resumeData.withLock { $0 } ?? nil)
    }


    // MARK: - A date in If-Range

    /// Resume data vouched for by a date alone (no entity tag): a server that ignores
    /// `If-Range` and sends a 206 of a newer version (another `Last-Modified`) does not get its
    /// bytes appended to the old ones; the whole new version is fetched. The file mixed both.
    func testA206OfAnotherDateIsNotAppendedToBytesVouchedForByADate() async throws {
        let old = patternedData(count: 320 * 1024)
        let new = patternedData(count: 320 * 1024, seed: 11)
        // Days before the `Date` sent, so that each is a strong validator whatever the clock says.
        let oldDate = HTTPDate.format(Date() - 2 * 86_400), newDate = HTTPDate.format(Date() - 86_400)
        let served = RequestCounter()
        server.route("/dated") { request in
            let first = served.next() == 1
            let body = first ? old : new
            var headers = [("Date", HTTPDate.format(Date())), ("Last-Modified", first ? oldDate : newDate),
                           ("Content-Type", "application/octet-stream")]
            var response = TestResponse(status: 200, headers: headers)
            if let range = request.header("Range"), range.hasPrefix("bytes="), let start = Int(range.dropFirst(6).dropLast()) {
                // If-Range ignored: the rest of whatever is there now.
                headers.append(("Content-Range", "bytes \(start)-\(body.count - 1)/\(body.count)"))
                response = TestResponse(status: 206, headers: headers, body: body.subdata(in: start..<body.count))
            } else {
                // 20 pieces, slowly: time to cancel the first download midway.
                response.body = .stream((0..<20).map { TestResponse.Chunk(body.subdata(in: $0 * 16384..<($0 + 1) * 16384), delay: .milliseconds(20)) })
                response.headers.append(("Content-Length", "\(body.count)"))
                response.framing = .contentLength
            }
            return response
        }
        let data = try await cancelForResumeData(URLRequest(url: try server.url("/dated")), after: 30_000)
        XCTAssertEqual(try DownloadResumeData(encoded: data).lastModified, oldDate)
        let destination = destinations.appendingPathComponent("dated")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(try Data(contentsOf: destination), new, "no byte of the old version is left")
    }

    /// A download that did not use the cookie jar resumes without it too: resume data kept
    /// the URL, headers and timeout only, and the resumed request sent the jar's cookies.
    func testResumingKeepsARequestOffTheCookieJar() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = downloads
        configuration.cookieJar = CookieJar()
        manager = URLSessionManager(configuration: configuration)
        server.route("/set") { _ in TestResponse(status: 200, headers: [("Set-Cookie", "session=secret; Path=/")], body: Data()) }
        _ = try await manager.data(for: URLRequest(url: try server.url("/set")))
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 300_000), delay: .milliseconds(10))
        var request = URLRequest(url: try server.url("/file"))
        request.httpShouldHandleCookies = false
        let data = try await cancelForResumeData(request, after: 30_000)
        let decoded = try DownloadResumeData(encoded: data)
        XCTAssertEqual(decoded.handlesCookies, false)
        XCTAssertEqual(decoded.version, 3, "a reader of version 2 would send the cookies: it must refuse the data")
        let destination = destinations.appendingPathComponent("no-cookies")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        let fileRequests = server.requests.filter { $0.uri == "/file" }
        XCTAssertEqual(fileRequests.count, 2)
        XCTAssertEqual(fileRequests.map { $0.header("Cookie") }, [nil, nil], "the jar's cookie went with the resumed request")
    }

    /// Resume data holds the caller's request, not the adapted one: the adapter's bearer
    /// token went into a file the caller writes to disk, and the resumed request, adapted again,
    /// carried the adapter's query item twice.
    func testResumeDataHoldsTheRequestBeforeTheAdapters() async throws {
        struct Signing: RequestAdapter {
            func adapt(_ request: URLRequest, attempt: Int) -> URLRequest {
                var request = request
                request.setValue("Bearer adapter-token", forHTTPHeaderField: "Authorization")
                if let url = request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
                    components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "sig", value: "s")]
                    request.url = components.url
                }
                return request
            }
        }
        manager.requestAdapter = Signing()
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 300_000), delay: .milliseconds(10))
        let data = try await cancelForResumeData(URLRequest(url: try server.url("/file")), after: 30_000)
        let text = String(decoding: data, as: UTF8.self)
        XCTAssertFalse(text.contains("adapter-token"), text)
        XCTAssertFalse(text.contains("sig="), text)
        let destination = destinations.appendingPathComponent("signed")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        let fileRequests = server.requests.filter { $0.path == "/file" }
        XCTAssertEqual(fileRequests.map(\.uri), ["/file?sig=s", "/file?sig=s"], "adapted once each")
        XCTAssertEqual(fileRequests.map { $0.header("Authorization") }, ["Bearer adapter-token", "Bearer adapter-token"])
    }

    /// A plain `cancel()` of a download made from resume data keeps the partial file: the
    /// caller's saved resume data names it, and still continues it. It was removed.
    func testCancellingAResumedDownloadKeepsThePartialFile() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await cancelForResumeData(URLRequest(url: try server.url("/file")), after: 30_000)
        let partial = try DownloadResumeData(encoded: data).partialFileURL
        route.state.withLock { $0.faults = [.stallAfter(0)] }
        let task = manager.downloadTask(withResumeData: data, destination: nil) { _ in }
        task.resume()
        try await eventually({ route.rangeRequests.count == 2 }, "the resumed request arrives")
        task.cancel()
        try await eventually({ task.state == .completed }, "the task completes")
        XCTAssertTrue(FileManager.default.fileExists(atPath: partial.path), "the saved resume data's file went")
        let destination = destinations.appendingPathComponent("after-cancel")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(try Data(contentsOf: destination), body)
    }

    /// An error status refusing a resumed download decides the task at its head: a body that
    /// never ends is cut there, not read until a timeout (the body of an answer that is not
    /// the task's went chunk by chunk to nowhere, and the idle clock never ran out).
    func testARefusingAnswerWithAnEndlessBodyIsCutAtItsHead() async throws {
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 300_000), delay: .milliseconds(10))
        let data = try await cancelForResumeData(URLRequest(url: try server.url("/file")), after: 30_000)
        let partial = try DownloadResumeData(encoded: data).partialFileURL
        let kept = try Data(contentsOf: partial)
        server.route("/file", response: .stream(
            [.init(Data("busy".utf8)), .init(Data("still busy".utf8), delay: .seconds(120))], status: 503, framing: .chunked))
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: nil, completionHandler: done)
        }
        guard case .resumeFailed(statusCode: 503, resumeData: let carried)? = response.error as? SessionError else {
            return XCTFail("expected resumeFailed(503), got \(String(describing: response.error))")
        }
        XCTAssertNotNil(carried)
        XCTAssertEqual(try Data(contentsOf: partial), kept, "the partial bytes are intact")
    }

    // MARK: - Resume meets the retrier

    /// A resumed download answered 503 goes through the retrier like any attempt; the retry's
    /// 206 continues the partial file (the dropped error body never reached it).
    func testAResumedDownloadRetriedAfterAnErrorContinuesThePartialFile() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await cancelForResumeData(URLRequest(url: try server.url("/file")), after: 30_000)
        let first = try DownloadResumeData(encoded: data)
        route.state.withLock { $0.errorStatus = 503 }
        let retrier = RecordingRetrier { attempt, _ in
            guard attempt == 0 else { return .doNotRetry }
            route.state.withLock { $0.errorStatus = nil }  // the server recovers before the retry
            return .retry
        }
        manager.requestRetrier = retrier
        let destination = destinations.appendingPathComponent("file")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(retrier.asked.withLock { $0 }, ["0 response"])
        XCTAssertEqual(response.response?.statusCode, 206, "the kept bytes were continued")
        XCTAssertEqual(route.rangeRequests.last?.range, "bytes=\(first.bytesReceived)-")
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(leftovers, [])
    }

    // MARK: - An error answer keeps the partial file

    func testAnErrorAnswerKeepsThePartialFileAndLeavesResumeData() async throws {
        let body = patternedData(count: 400_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        var data = try await cancelForResumeData(URLRequest(url: try server.url("/file")), after: 40_000)
        let first = try DownloadResumeData(encoded: data)
        let kept = body.prefix(Int(first.bytesReceived))
        let destination = destinations.appendingPathComponent("file")
        for status in [503, 404, 429, 401] {
            // The 401 goes through the challenge handler, which leaves it unanswered.
            if status == 401 { manager.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling } }
            route.state.withLock { $0.errorStatus = status }
            let (task, response) = await download { done in
                manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
            }
            guard case .resumeFailed(statusCode: let code, resumeData: let carried)? = response.error as? SessionError else {
                XCTFail("\(status): expected resumeFailed, got \(String(describing: response.error))")
                continue
            }
            XCTAssertEqual(code, status)
            XCTAssertEqual(response.response?.statusCode, status)
            XCTAssertNil(response.fileURL)
            let fresh = try XCTUnwrap(carried, "\(status): the error carries resume data")
            XCTAssertEqual(task.resumeData, fresh, "\(status): the task's resume data is the error's")
            XCTAssertEqual(task.error as? SessionError, response.error as? SessionError)
            let again = try DownloadResumeData(encoded: fresh)
            XCTAssertEqual(again.bytesReceived, first.bytesReceived)
            XCTAssertEqual(again.partialFileURL, first.partialFileURL)
            XCTAssertEqual(again.entityTag, first.entityTag)
            XCTAssertEqual(try Data(contentsOf: first.partialFileURL), kept, "\(status): the partial bytes are intact")
            XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path), "\(status): no error page as the file")
            data = fresh
        }
        route.state.withLock {
            $0.errorStatus = nil
            $0.rangeRequests = []
        }
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(response.response?.statusCode, 206, "the kept bytes were continued")
        XCTAssertEqual(route.rangeRequests.first?.range, "bytes=\(first.bytesReceived)-")
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(leftovers, [])
    }

    func testARefusedRangeAnsweredByAnErrorKeepsThePartialFile() async throws {
        let body = patternedData(count: 300_000)
        for refusal in ["416", "a 206 for other bytes"] {
            _ = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
            let data = try await cancelForResumeData(URLRequest(url: try server.url("/file")), after: 30_000)
            let first = try DownloadResumeData(encoded: data)
            let offset = Int(first.bytesReceived)
            // The range is refused; the request for the whole body then meets an error.
            server.route("/file") { request in
                guard request.headers.contains(where: { $0.name.lowercased() == "range" }) else {
                    return TestResponse(status: 503, body: Data("busy".utf8))
                }
                if refusal == "416" {
                    return TestResponse(status: 416, headers: [("Content-Range", "bytes */\(body.count)")], body: Data())
                }
                return TestResponse(
                    status: 206,
                    headers: [("ETag", "\"v1\""), ("Content-Range", "bytes \(offset + 10)-\(body.count - 1)/\(body.count)")],
                    body: body.subdata(in: offset + 10..<body.count))
            }
            let before = server.requests.count
            let (task, response) = await download { done in
                manager.downloadTask(withResumeData: data, destination: nil, completionHandler: done)
            }
            guard case .resumeFailed(statusCode: 503, resumeData: let carried)? = response.error as? SessionError else {
                XCTFail("\(refusal): expected resumeFailed(503), got \(String(describing: response.error))")
                continue
            }
            XCTAssertEqual(carried, task.resumeData)
            XCTAssertEqual(try DownloadResumeData(encoded: try XCTUnwrap(carried)).bytesReceived, first.bytesReceived)
            XCTAssertEqual(try Data(contentsOf: first.partialFileURL), body.prefix(offset), "\(refusal): the partial bytes are intact")
            let sent = server.requests.dropFirst(before).map { $0.headers.contains { $0.name.lowercased() == "range" } }
            XCTAssertEqual(sent, [true, false], "\(refusal): the range, then the whole body")
            try FileManager.default.removeItem(at: first.partialFileURL)
        }
    }

    // MARK: - A failed write keeps the earlier bytes

    /// The largest length a file in `directory` can have (ftruncate's limit, found by halving).
    private func largestFileSize(in directory: URL) -> Int64? {
        let probe = directory.appendingPathComponent("size-probe")
        let descriptor = open(probe.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { return nil }
        defer {
            close(descriptor)
            unlink(probe.path)
        }
        var low: Int64 = 0
        var high = Int64.max
        while low < high {  // at most 63 steps
            let middle = low + (high - low) / 2 + 1
            if ftruncate(descriptor, off_t(middle)) == 0 { low = middle } else { high = middle - 1 }
        }
        return low
    }

    func testAFailedWriteKeepsTheEarlierBytesAndLeavesResumeData() async throws {
        // A full disk, played without touching the machine or this process's limits: a sparse
        // partial file ending 50,000 bytes below the file system's largest file size, so the
        // resumed body's writes fail (EFBIG) after 50,000 bytes, in the same pwrite path as
        // ENOSPC.
        let maximum = try XCTUnwrap(largestFileSize(in: downloads))
        guard maximum < Int64.max - (1 << 30) else {
            throw XCTSkip("the download directory's file system has no file size limit to write against")
        }
        let earlier = maximum - 50_000
        let total = earlier + 200_000
        let partial = downloads.appendingPathComponent("\(DownloadOptions.partialFilePrefix)\(UUID().uuidString).tmp")
        let head = patternedData(count: 4_096, seed: 3)
        let tail = patternedData(count: 4_096, seed: 5)
        let descriptor = open(partial.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        XCTAssertEqual(ftruncate(descriptor, off_t(earlier)), 0)
        XCTAssertEqual(head.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }, 4_096)
        XCTAssertEqual(tail.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(earlier - 4_096)) }, 4_096)
        close(descriptor)

        let rest = patternedData(count: 200_000, seed: 9)
        server.route("/huge") { request in
            func header(_ name: String) -> String? {
                request.headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
            }
            guard header("Range") == "bytes=\(earlier)-", header("If-Range") == "\"v1\"" else {
                return TestResponse(status: 500, body: Data("not the range expected".utf8))
            }
            let chunks = stride(from: 0, to: rest.count, by: 16 * 1024).map { offset in
                TestResponse.Chunk(rest.subdata(in: offset..<min(offset + 16 * 1024, rest.count)))
            }
            return .stream(
                chunks, status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes \(earlier)-\(total - 1)/\(total)")],
                framing: .contentLength)
        }
        let data = DownloadResumeData(
            url: try server.url("/huge"), headers: [:], timeoutInterval: 60, partialFileURL: partial,
            bytesReceived: earlier, entityTag: "\"v1\"", lastModified: nil, expectedLength: total
        ).encoded()
        let destination = destinations.appendingPathComponent("huge")
        let (task, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        guard case .fileWriteFailed(let detail)? = response.error as? SessionError else {
            return XCTFail("expected fileWriteFailed, got \(String(describing: response.error))")
        }
        XCTAssertTrue(detail.contains("too large"), detail)
        XCTAssertEqual(fileSize(of: partial), maximum, "the partial file is kept, with every byte written")
        XCTAssertEqual(try fileBytes(of: partial, at: 0, count: 4_096), head, "the earlier bytes are intact")
        XCTAssertEqual(try fileBytes(of: partial, at: earlier - 4_096, count: 4_096), tail, "the earlier bytes are intact")
        XCTAssertEqual(try fileBytes(of: partial, at: earlier, count: 50_000), rest.prefix(50_000))
        let resume = try DownloadResumeData(encoded: try XCTUnwrap(task.resumeData, "the download can continue once there is room"))
        XCTAssertEqual(resume.partialFileURL, partial)
        XCTAssertEqual(resume.bytesReceived, maximum)
        XCTAssertEqual(resume.entityTag, "\"v1\"")
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path))
    }

    // MARK: - A caller's byte range

    func testACallersByteRangeIsKeptAcrossResume() async throws {
        let body = patternedData(count: 26_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body, chunkSize: 1_000, delay: .milliseconds(20))
        var request = URLRequest(url: try server.url("/file"))
        request.setValue("bytes=1000-25999", forHTTPHeaderField: "Range")
        let data = try await cancelForResumeData(request, after: 3_000)
        let resume = try DownloadResumeData(encoded: data)
        XCTAssertEqual(resume.rangeFirst, 1_000)
        XCTAssertEqual(resume.rangeLast, 25_999)
        XCTAssertEqual(resume.expectedLength, 25_000)
        XCTAssertEqual(resume.version, 2, "a range needs version 2")
        XCTAssertFalse(resume.headers.keys.contains { $0.lowercased() == "range" })
        let have = resume.bytesReceived
        XCTAssertLessThan(have, 25_000)

        route.state.withLock { $0.rangeRequests = [] }
        let destination = destinations.appendingPathComponent("range")
        let (task, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(response.response?.statusCode, 206)
        XCTAssertEqual(route.rangeRequests.map { $0.range }, ["bytes=\(1_000 + have)-25999"], "the rest of the range only")
        XCTAssertEqual(route.rangeRequests.first?.ifRange, "\"v1\"")
        let file = try Data(contentsOf: destination)
        XCTAssertEqual(file.count, 25_000)
        XCTAssertEqual(file, body.subdata(in: 1_000..<26_000), "exactly the bytes asked for")
        XCTAssertEqual(task.countOfBytesExpectedToReceive, 25_000)
    }

    func testAChangedFileAsksForTheCallersRangeAgain() async throws {
        let route = RangeFileRoute(
            server: server, path: "/file", body: patternedData(count: 26_000), chunkSize: 1_000, delay: .milliseconds(20))
        var request = URLRequest(url: try server.url("/file"))
        request.setValue("bytes=1000-25999", forHTTPHeaderField: "Range")
        let data = try await cancelForResumeData(request, after: 3_000)
        let have = try DownloadResumeData(encoded: data).bytesReceived
        let changed = patternedData(count: 30_000, seed: 7)
        route.state.withLock {
            $0.body = changed
            $0.entityTag = "\"v2\""
            $0.rangeRequests = []
        }
        let destination = destinations.appendingPathComponent("changed")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(try Data(contentsOf: destination), changed.subdata(in: 1_000..<26_000), "the range of the new file")
        let requests = route.rangeRequests
        XCTAssertEqual(requests.map { $0.range }, ["bytes=\(1_000 + have)-25999", "bytes=1000-25999"])
        XCTAssertEqual(requests.map { $0.ifRange }, ["\"v1\"", nil], "the range again, without the old validator")
    }

    /// A changed file answers the resumed range with a 200 of the whole new file: Curlew stops
    /// reading it at its head (it cannot use it for the caller's range) instead of reading
    /// every byte of it before asking again.
    func testARefusedRangeIsNotReadToTheEndBeforeTheRestart() async throws {
        _ = RangeFileRoute(
            server: server, path: "/file", body: patternedData(count: 26_000), chunkSize: 1_000, delay: .milliseconds(20))
        var request = URLRequest(url: try server.url("/file"))
        request.setValue("bytes=1000-25999", forHTTPHeaderField: "Range")
        let data = try await cancelForResumeData(request, after: 3_000)
        let changed = patternedData(count: 8 << 20, seed: 3)
        let route = RangeFileRoute(server: server, path: "/file", body: changed, entityTag: "\"v2\"", chunkSize: 64 * 1024)
        let destination = destinations.appendingPathComponent("refused")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(try Data(contentsOf: destination), changed.subdata(in: 1_000..<26_000))
        XCTAssertEqual(route.rangeRequests.map { $0.ifRange }, ["\"v1\"", nil])
        let exchanges = try XCTUnwrap(response.metrics).transactionMetrics
        XCTAssertEqual(exchanges.map(\.statusCode), [200, 206])
        XCTAssertLessThan(
            exchanges[0].responseBodyBytesReceived, Int64(changed.count / 4),
            "the refused answer's body is not read to its end")
    }

    func testResumeDataWithoutARangeReadsAsBefore() async throws {
        let body = patternedData(count: 100_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body)
        let partial = downloads.appendingPathComponent("\(DownloadOptions.partialFilePrefix)\(UUID().uuidString).tmp")
        try body.prefix(30_000).write(to: partial)
        let url = try server.url("/file")
        // As Curlew wrote it before resume data kept byte ranges.
        let old = Data("""
            {"bytesReceived":30000,"entityTag":"\\"v1\\"","expectedLength":100000,"headers":{},\
            "partialFileURL":"\(partial.absoluteString)","timeoutInterval":60,"url":"\(url.absoluteString)","version":1}
            """.utf8)
        let decoded = try DownloadResumeData(encoded: old)
        XCTAssertEqual(decoded.version, 1)
        XCTAssertNil(decoded.rangeFirst)
        XCTAssertNil(decoded.rangeLast)
        XCTAssertEqual(decoded.bytesReceived, 30_000)
        // Without a range, this Curlew still writes version 1 (an older one reads it).
        XCTAssertEqual(try DownloadResumeData(encoded: decoded.encoded()).version, 1)

        let destination = destinations.appendingPathComponent("old")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: old, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(route.rangeRequests.map { $0.range }, ["bytes=30000-"])
        XCTAssertEqual(try Data(contentsOf: destination), body)

        var broken = decoded
        broken.rangeFirst = 500
        broken.rangeLast = 100
        XCTAssertThrowsError(try DownloadResumeData(encoded: broken.encoded())) { error in
            guard case .invalidResumeData? = error as? SessionError else { return XCTFail("got \(error)") }
        }
    }

    // MARK: - The finished file stays claimed until it is moved

    /// Waits (bounded: about 20 s) until `condition` holds.
    private func waitFor(_ condition: () -> Bool, _ message: String) async throws {
        for _ in 0..<2_000 where !condition() { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(condition(), message)
    }

    func testAFinishedFileStaysClaimedUntilItIsMoved() async throws {
        try await assertTheFinishedFileStaysClaimed(afterALosingCancel: false)
    }

    /// A `cancel()` that lost the race to the transfer's end (the driver finished the download
    /// in the pass the cancel came in after) completes nothing, and the claim it ended was the
    /// winner's: a second task from the same resume data then cut the finished file back and
    /// appended to it while the first moved it to its destination.
    func testACancelThatLostToTheFinishLeavesTheFileClaimed() async throws {
        try await assertTheFinishedFileStaysClaimed(afterALosingCancel: true)
    }

    private func assertTheFinishedFileStaysClaimed(afterALosingCancel: Bool) async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await cancelForResumeData(URLRequest(url: try server.url("/file")), after: 30_000)
        route.state.withLock { $0.rangeRequests = [] }

        let second = Mutex<DownloadTask?>(nil)
        let firstTask = Mutex<DownloadTask?>(nil)
        let inDestination = Mutex(false)
        let sizeWhileWaiting = Mutex<Int64?>(nil)
        let results = Mutex<[String: DataResponse]>([:])
        let firstDestination = destinations.appendingPathComponent("first")
        let secondDestination = destinations.appendingPathComponent("second")
        let first = manager.downloadTask(
            withResumeData: data,
            destination: { temporary, _ in
                if afterALosingCancel, let task = firstTask.withLock({ $0 }) {
                    // What the driver does with a cancel it reads after the task completed.
                    task.engine.complete(task, outcome: TransferOutcome(error: .cancelled, request: nil))
                }
                inDestination.withLock { $0 = true }
                // The file is complete but not moved yet: hold it here (bounded) until the second
                // task, resumed from the same data, tried to claim it.
                for _ in 0..<2_000 {
                    if second.withLock({ $0 })?.state == .completed || route.rangeRequests.count > 1 { break }
                    usleep(10_000)
                }
                sizeWhileWaiting.withLock { $0 = fileSize(of: temporary) }
                return firstDestination
            },
            completionHandler: { response in results.withLock { $0["first"] = response } })
        firstTask.withLock { $0 = first }
        first.resume()
        try await waitFor({ inDestination.withLock { $0 } }, "the first task reaches its destination closure")

        let secondTask = manager.downloadTask(
            withResumeData: data, destination: { _, _ in secondDestination },
            completionHandler: { response in results.withLock { $0["second"] = response } })
        second.withLock { $0 = secondTask }
        secondTask.resume()
        try await waitFor({ results.withLock { $0.count } == 2 }, "both tasks complete")

        let secondResult = results.withLock { $0["second"] }
        guard case .fileWriteFailed(let detail)? = secondResult?.error as? SessionError else {
            return XCTFail("the second task must fail, got \(String(describing: secondResult?.error))")
        }
        XCTAssertTrue(detail.contains("in use by another download task"), detail)
        XCTAssertEqual(sizeWhileWaiting.withLock { $0 }, Int64(body.count), "the finished file was never cut")
        XCTAssertNil(results.withLock { $0["first"] }?.error)
        XCTAssertEqual(try Data(contentsOf: firstDestination), body)
        XCTAssertEqual(route.rangeRequests.count, 1, "the second task sent nothing")
        XCTAssertFalse(FileManager.default.fileExists(atPath: secondDestination.path))

        // Once the file was moved, the same resume data finds no partial file: a new download.
        let (_, third) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in secondDestination }, completionHandler: done)
        }
        XCTAssertNil(third.error)
        XCTAssertEqual(try Data(contentsOf: secondDestination), body)
        XCTAssertNil(route.rangeRequests.last?.range, "asked for the whole body")
        XCTAssertEqual(try Data(contentsOf: firstDestination), body, "the first file is untouched")
        XCTAssertEqual(leftovers, [])
    }
}

/// The size of `file` on disk (nil when it is not there).
private func fileSize(of file: URL) -> Int64? {
    (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.int64Value
}

/// `count` bytes of `file` from `offset`.
private func fileBytes(of file: URL, at offset: Int64, count: Int) throws -> Data {
    let handle = try FileHandle(forReadingFrom: file)
    defer { try? handle.close() }
    try handle.seek(toOffset: UInt64(offset))
    return try handle.read(upToCount: count) ?? Data()
}
