import CurlewTestSupport
import Foundation
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Download tasks: the body streams to a file, moves to its destination, and a stopped
/// download continues with `Range`/`If-Range` or starts again cleanly.
final class DownloadTaskTests: XCTestCase {
    var manager: URLSessionManager!
    var server: TestServer!
    /// This test's download directory (temporary files) and a place for destinations.
    var downloads: URL!
    var destinations: URL!

    override func setUp() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-dl-\(UUID().uuidString)")
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

    /// The `SessionError` case name of an error ("none" when nil, the type otherwise).
    private func errorCase(_ error: (any Error)?) -> String {
        guard let error else { return "none" }
        guard let sessionError = error as? SessionError else { return "\(type(of: error))" }
        return caseName(of: sessionError)
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

    // MARK: - Straight downloads

    func testTheBodyLandsAtTheDestinationWithEveryByte() async throws {
        let body = patternedData(count: 2_000_000)
        _ = RangeFileRoute(server: server, path: "/file", body: body)
        let destination = destinations.appendingPathComponent("file.bin")
        let moved = expectation(forNotification: .downloadTaskDidMoveFileSuccessfully, object: nil)
        let completed = expectation(forNotification: .taskDidComplete, object: nil)
        let asset = Mutex<URL?>(nil)
        let order = Mutex<[String]>([])
        let observer = NotificationCenter.default.addObserver(forName: .taskDidComplete, object: nil, queue: nil) { note in
            asset.withLock { $0 = note.userInfo?[SessionNotificationKey.assetPath] as? URL }
            order.withLock { $0.append("complete") }
        }
        let moveObserver = NotificationCenter.default.addObserver(
            forName: .downloadTaskDidMoveFileSuccessfully, object: nil, queue: nil
        ) { _ in order.withLock { $0.append("moved") } }
        let resumeObserver = NotificationCenter.default.addObserver(forName: .taskDidResume, object: nil, queue: nil) { _ in
            order.withLock { $0.append("resumed") }
        }
        defer { [observer, moveObserver, resumeObserver].forEach(NotificationCenter.default.removeObserver) }
        let seenTemporary = Mutex<URL?>(nil)
        let (task, response) = await download { done in
            manager.downloadTask(
                with: URLRequest(url: try! server.url("/file")), progress: nil,
                destination: { temporary, response in
                    seenTemporary.withLock { $0 = temporary }
                    XCTAssertEqual(response?.statusCode, 200)
                    return destination
                }, completionHandler: done)
        }
        await fulfillment(of: [moved, completed], timeout: 30)
        XCTAssertNil(response.error)
        XCTAssertEqual(response.fileURL, destination)
        XCTAssertEqual(response.value as? URL, destination)
        XCTAssertNil(response.data)
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(asset.withLock { $0 }, destination)
        XCTAssertEqual(order.withLock { $0 }, ["resumed", "moved", "complete"], "notifications in order")
        XCTAssertEqual(seenTemporary.withLock { $0 }?.deletingLastPathComponent().path, downloads.path)
        XCTAssertEqual(task.countOfBytesReceived, Int64(body.count))
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual(leftovers, [], "the temporary file was moved, not copied")
        XCTAssertTrue(manager.downloadTasks.isEmpty)
    }

    func testWithoutADestinationTheFileLivesUntilTheHandlerReturns() async throws {
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 100_000))
        let existedInHandler = Mutex(false)
        let completed = expectation(forNotification: .taskDidComplete, object: nil)
        let (_, response) = await download { done in
            manager.downloadTask(with: URLRequest(url: try! server.url("/file")), destination: nil) { response in
                existedInHandler.withLock { $0 = response.fileURL.map { FileManager.default.fileExists(atPath: $0.path) } ?? false }
                done(response)
            }
        }
        await fulfillment(of: [completed], timeout: 30)
        XCTAssertTrue(existedInHandler.withLock { $0 })
        let fileURL = try XCTUnwrap(response.fileURL)
        try await eventually({ !FileManager.default.fileExists(atPath: fileURL.path) }, "removed after the handler")
        XCTAssertEqual(leftovers, [])
    }

    func testAnExistingDestinationFailsTheMoveAndSaysSo() async throws {
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 10_000))
        let destination = destinations.appendingPathComponent("taken")
        try Data("mine".utf8).write(to: destination)
        let failed = expectation(forNotification: .downloadTaskDidFailToMoveFile, object: nil)
        let (task, response) = await download { done in
            manager.downloadTask(
                with: URLRequest(url: try! server.url("/file")), destination: { _, _ in destination }, completionHandler: done)
        }
        await fulfillment(of: [failed], timeout: 30)
        XCTAssertEqual(errorCase(response.error), "fileWriteFailed")
        XCTAssertEqual(errorCase(task.error), "fileWriteFailed")
        XCTAssertEqual(try Data(contentsOf: destination), Data("mine".utf8), "the caller's file is untouched")
        XCTAssertNil(response.fileURL)
        XCTAssertEqual(leftovers, [])
    }

    /// A download directory on another file system than the destination (`/dev/shm`, a tmpfs):
    /// the file is copied across, whole, and no temporary file stays behind.
    func testADownloadMovesAcrossFileSystems() async throws {
        let shm = URL(fileURLWithPath: "/dev/shm/curlew-dl-\(UUID().uuidString)")
        guard (try? FileManager.default.createDirectory(at: shm, withIntermediateDirectories: false)) != nil else {
            throw XCTSkip("no /dev/shm on this machine")
        }
        defer { try? FileManager.default.removeItem(at: shm) }
        var shmStatus = stat(), destinationStatus = stat()
        guard stat(shm.path, &shmStatus) == 0, stat(destinations.path, &destinationStatus) == 0,
            shmStatus.st_dev != destinationStatus.st_dev
        else { throw XCTSkip("/dev/shm is on the destinations' file system here") }
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = shm
        let across = URLSessionManager(configuration: configuration)
        defer { across.invalidateSessionCancelingTasks(true, resetSession: false) }
        let body = patternedData(count: 1_500_000)
        _ = RangeFileRoute(server: server, path: "/file", body: body)
        let destination = destinations.appendingPathComponent("file.bin")
        let moved = expectation(forNotification: .downloadTaskDidMoveFileSuccessfully, object: nil)
        let (_, response) = await download { done in
            across.downloadTask(
                with: URLRequest(url: try! server.url("/file")), destination: { _, _ in destination }, completionHandler: done)
        }
        await fulfillment(of: [moved], timeout: 30)
        XCTAssertNil(response.error)
        XCTAssertEqual(response.fileURL, destination)
        XCTAssertEqual(try Data(contentsOf: destination), body)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: shm.path), [])
    }

    func testADestinationInAMissingDirectoryIsAClearError() async throws {
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 10_000))
        let destination = destinations.appendingPathComponent("no/such/dir/file")
        let (_, response) = await download { done in
            manager.downloadTask(
                with: URLRequest(url: try! server.url("/file")), destination: { _, _ in destination }, completionHandler: done)
        }
        guard case .fileWriteFailed(let detail)? = response.error as? SessionError else {
            return XCTFail("expected fileWriteFailed, got \(String(describing: response.error))")
        }
        XCTAssertTrue(detail.contains("no/such/dir"), detail)
        XCTAssertEqual(leftovers, [])
    }

    func testTheManagerHookChoosesTheDestinationAndWriteCallsAddUp() async throws {
        let body = patternedData(count: 700_000)
        _ = RangeFileRoute(server: server, path: "/file", body: body)
        let hookDestination = destinations.appendingPathComponent("hook")
        let written = Mutex<(sum: Int64, total: Int64, expected: Int64)>((0, 0, 0))
        manager.setDownloadTaskDidWriteDataBlock { _, bytes, total, expected in
            written.withLock { $0 = ($0.sum + bytes, total, expected) }
        }
        manager.setDownloadTaskDidFinishDownloadingBlock { _, _ in hookDestination }
        let (_, response) = await download { done in
            manager.downloadTask(
                with: URLRequest(url: try! server.url("/file")),
                destination: { _, _ in XCTFail("the hook's URL wins"); return URL(fileURLWithPath: "/nonexistent") },
                completionHandler: done)
        }
        XCTAssertEqual(response.fileURL, hookDestination)
        XCTAssertEqual(try Data(contentsOf: hookDestination), body)
        let figures = written.withLock { $0 }
        XCTAssertEqual(figures.sum, Int64(body.count))
        XCTAssertEqual(figures.total, Int64(body.count))
        XCTAssertEqual(figures.expected, Int64(body.count))
    }

    func testProgressReachesOneWithAndWithoutAClosure() async throws {
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 300_000))
        let lastFraction = Mutex(0.0)
        let (task, _) = await download { done in
            manager.downloadTask(
                with: URLRequest(url: try! server.url("/file")),
                progress: { progress in lastFraction.withLock { $0 = progress.fractionCompleted } },
                destination: nil, completionHandler: done)
        }
        XCTAssertEqual(lastFraction.withLock { $0 }, 1)
        let progress = try XCTUnwrap(manager.downloadProgress(for: task))
        XCTAssertTrue(progress.isFinished)
        XCTAssertEqual(progress.completedUnitCount, 300_000)
    }

    func testSuspendAndResumeMidBodyGiveTheWholeFile() async throws {
        let body = patternedData(count: 400_000)
        _ = RangeFileRoute(server: server, path: "/slow", body: body, delay: .milliseconds(5))
        let destination = destinations.appendingPathComponent("slow")
        let finished = Mutex<DataResponse?>(nil)
        let task = manager.downloadTask(
            with: URLRequest(url: try server.url("/slow")), destination: { _, _ in destination }
        ) { response in finished.withLock { $0 = response } }
        task.resume()
        try await eventually({ task.countOfBytesReceived > 50_000 }, "bytes arrive")
        task.suspend()
        XCTAssertEqual(task.state, .suspended)
        task.resume()
        try await eventually({ finished.withLock { $0 } != nil }, "completes after resuming")
        XCTAssertNil(finished.withLock { $0 }?.error)
        XCTAssertEqual(try Data(contentsOf: destination), body)
    }

    func testAnErrorStatusIsDownloadedButTheAsyncCallThrowsAndLeavesNoFile() async throws {
        server.route("/missing", response: .text("no such thing", status: 404))
        let destination = destinations.appendingPathComponent("missing")
        do {
            _ = try await manager.download(for: URLRequest(url: try server.url("/missing")), to: destination)
            XCTFail("a 404 is not a download")
        } catch SerializationError.unacceptableStatusCode(let status, _, _) {
            XCTAssertEqual(status, 404)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path))

        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 5_000))
        let url = try await manager.download(for: URLRequest(url: try server.url("/file")), to: destination)
        XCTAssertEqual(url, destination)
        XCTAssertEqual(try Data(contentsOf: destination), patternedData(count: 5_000))
    }

    // MARK: - Resume

    /// Cancels `/file` for resume data once `after` bytes arrived.
    private func cancelForResumeData(after bytes: Int64) async throws -> Data {
        let resumeData = Mutex<Data??>(nil)
        let task = manager.downloadTask(with: URLRequest(url: try server.url("/file")), destination: nil) { _ in }
        task.resume()
        try await eventually({ task.countOfBytesReceived >= bytes }, "bytes arrive")
        task.cancel { data in resumeData.withLock { $0 = .some(data) } }
        try await eventually({ resumeData.withLock { $0 } != nil }, "resume data arrives")
        try await eventually({ task.state == .completed }, "the task completes")
        XCTAssertEqual(task.error as? SessionError, .cancelled)
        return try XCTUnwrap(resumeData.withLock { $0 } ?? nil)
    }

    func testResumeDataContinuesWithTheMissingBytesOnly() async throws {
        let body = patternedData(count: 1_000_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await cancelForResumeData(after: 100_000)
        let resume = try DownloadResumeData(encoded: data)
        XCTAssertGreaterThanOrEqual(resume.bytesReceived, 100_000)
        XCTAssertLessThan(resume.bytesReceived, Int64(body.count))
        XCTAssertEqual(resume.entityTag, "\"v1\"")
        XCTAssertEqual(resume.expectedLength, Int64(body.count))
        XCTAssertEqual(leftovers.count, 1, "the partial file is kept for the resume data")

        route.state.withLock { $0.rangeRequests = [] }
        let destination = destinations.appendingPathComponent("resumed")
        let written = Mutex<Int64>(0)
        manager.setDownloadTaskDidWriteDataBlock { _, bytes, _, _ in written.withLock { $0 += bytes } }
        let (task, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(response.response?.statusCode, 206)
        XCTAssertEqual(try Data(contentsOf: destination), body, "identical to a straight download")
        XCTAssertEqual(route.rangeRequests.first?.range, "bytes=\(resume.bytesReceived)-")
        XCTAssertEqual(route.rangeRequests.first?.ifRange, "\"v1\"")
        XCTAssertEqual(written.withLock { $0 }, Int64(body.count) - resume.bytesReceived, "only the rest was written")
        XCTAssertEqual(task.countOfBytesReceived, Int64(body.count))
        XCTAssertEqual(task.countOfBytesExpectedToReceive, Int64(body.count))
        XCTAssertEqual(leftovers, [])
    }

    func testAChangedEntityTagStartsAgainFromByteZero() async throws {
        let route = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 600_000), delay: .milliseconds(10))
        let data = try await cancelForResumeData(after: 50_000)
        let changed = patternedData(count: 500_000, seed: 99)
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
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(try Data(contentsOf: destination), changed)
        XCTAssertEqual(route.rangeRequests.count, 1, "If-Range made it one request")
    }

    func testARefusedRangeIsAskedForAgainWhole() async throws {
        let body = patternedData(count: 300_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await cancelForResumeData(after: 30_000)
        route.state.withLock {
            $0.refusesRanges = true
            $0.rangeRequests = []
        }
        let destination = destinations.appendingPathComponent("whole")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(try Data(contentsOf: destination), body)
        let requests = route.rangeRequests
        XCTAssertEqual(requests.count, 2)
        XCTAssertNotNil(requests.first?.range)
        XCTAssertNil(requests.last?.range, "the second request asks for everything")
    }

    func testAMissingPartialFileStartsAgainFromByteZero() async throws {
        let body = patternedData(count: 200_000)
        _ = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await cancelForResumeData(after: 20_000)
        try FileManager.default.removeItem(at: try DownloadResumeData(encoded: data).partialFileURL)
        let destination = destinations.appendingPathComponent("again")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(try Data(contentsOf: destination), body)
    }

    func testCancellingAResumedDownloadBeforeItsAnswerKeepsThePartialFile() async throws {
        let body = patternedData(count: 300_000)
        _ = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await cancelForResumeData(after: 40_000)
        let first = try DownloadResumeData(encoded: data)
        // Now the server takes its time before answering: the resumed task is cancelled while
        // it waits for the head.
        let requestsBefore = server.requests.count
        server.route("/file") { _ in
            var slow = TestResponse.text("late")
            slow.delayBeforeHead = .seconds(3)
            return slow
        }
        let again = Mutex<Data??>(nil)
        let task = manager.downloadTask(withResumeData: data, destination: nil) { _ in }
        task.resume()
        try await eventually({ self.server.requests.count > requestsBefore }, "the request reached the server")
        task.cancel { resumeData in again.withLock { $0 = .some(resumeData) } }
        try await eventually({ again.withLock { $0 } != nil }, "resume data arrives")
        let second = try DownloadResumeData(encoded: try XCTUnwrap(again.withLock { $0 } ?? nil))
        XCTAssertEqual(second.bytesReceived, first.bytesReceived)
        XCTAssertEqual(second.entityTag, first.entityTag)
        let attributes = try FileManager.default.attributesOfItem(atPath: second.partialFileURL.path)
        XCTAssertEqual((attributes[.size] as? NSNumber)?.int64Value, first.bytesReceived, "the partial bytes are intact")
    }

    func testA206ForOtherBytesIsNotTakenForTheRest() async throws {
        let body = patternedData(count: 200_000)
        let route = RangeFileRoute(server: server, path: "/file", body: body, delay: .milliseconds(10))
        let data = try await cancelForResumeData(after: 20_000)
        let offset = Int(try DownloadResumeData(encoded: data).bytesReceived)
        route.state.withLock { $0.rangeRequests = [] }
        // The server answers the range with 100 bytes only: not the rest of the file.
        server.route("/file") { request in
            if request.headers.contains(where: { $0.name.lowercased() == "range" }) {
                return TestResponse(
                    status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes \(offset)-\(offset + 99)/\(body.count)")],
                    body: body.subdata(in: offset..<offset + 100))
            }
            return TestResponse(status: 200, headers: [("ETag", "\"v1\"")], body: body)
        }
        let destination = destinations.appendingPathComponent("exact")
        let (_, response) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(response.error)
        XCTAssertEqual(try Data(contentsOf: destination), body, "asked again for everything, never a short file")
    }

    func testAnUnanswered401IsTheDownloadsBody() async throws {
        server.route("/private") { _ in
            TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], body: Data("who?".utf8))
        }
        manager.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling }
        let destination = destinations.appendingPathComponent("denied")
        let (_, response) = await download { done in
            manager.downloadTask(
                with: URLRequest(url: try! server.url("/private")), destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertEqual(response.response?.statusCode, 401)
        XCTAssertEqual(try Data(contentsOf: destination), Data("who?".utf8))
    }

    /// An unanswered 401 whose body outgrew what is kept while it is held back fails the task
    /// instead of ending as that body's first MiB (the download's file and a data task's data
    /// were cut at 1 MiB without a word): a download keeps 1 MiB of it, a data task what it
    /// would keep of an answer (all of it without a limit, its configured limit otherwise).
    func testAnUnanswered401WithALargeBodyFailsRatherThanEndingCut() async throws {
        let body = patternedData(count: 3 << 20)
        server.route("/private-large") { _ in
            TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], body: body)
        }
        manager.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling }
        let destination = destinations.appendingPathComponent("denied-large")
        let (_, response) = await download { done in
            manager.downloadTask(
                with: URLRequest(url: try! server.url("/private-large")), destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertEqual(response.error as? SessionError, .responseBodyTooLarge(limit: 1 << 20))
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path))
        func dataTask(on manager: URLSessionManager) async -> DataResponse {
            await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
                manager.dataTask(with: URLRequest(url: try! server.url("/private-large"))) { continuation.resume(returning: $0) }.resume()
            }
        }
        let whole = await dataTask(on: manager)
        XCTAssertEqual(whole.response?.statusCode, 401)
        XCTAssertEqual(whole.data, body, "no limit configured: the whole body, as for any answer")
        var configuration = SessionConfiguration.default
        configuration.maximumCollectedBodyBytes = 100 << 10
        let limited = URLSessionManager.raw(configuration)
        limited.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling }
        let refused = await dataTask(on: limited)
        XCTAssertEqual(refused.error as? SessionError, .responseBodyTooLarge(limit: 100 << 10))
        XCTAssertNil(refused.data)
        // A body just past the limit (the chunk that crossed it was kept whole).
        server.route("/private-just-over") { _ in
            TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], body: patternedData(count: (100 << 10) + 3000))
        }
        let justOver = await withCheckedContinuation { (continuation: CheckedContinuation<DataResponse, Never>) in
            limited.dataTask(with: URLRequest(url: try! server.url("/private-just-over"))) { continuation.resume(returning: $0) }.resume()
        }
        XCTAssertEqual(justOver.error as? SessionError, .responseBodyTooLarge(limit: 100 << 10))
        // A stream gets the same failure, not the first MiB as the whole body.
        do {
            let (stream, _) = try await manager.bytes(for: URLRequest(url: try server.url("/private-large")))
            var count = 0
            for try await chunk in stream { count += chunk.count }
            XCTFail("the stream ended after \(count) bytes without an error")
        } catch let error as SessionError {
            XCTAssertEqual(error, .responseBodyTooLarge(limit: 1 << 20))
        }
        limited.invalidateSessionCancelingTasks(true, resetSession: false)
        await limited.waitUntilInvalidated()
    }

    func testCorruptResumeDataIsAClearError() async throws {
        var outside = DownloadResumeData(
            url: try server.url("/file"), headers: [:], timeoutInterval: 60,
            partialFileURL: URL(fileURLWithPath: "/etc/passwd"), bytesReceived: 10, entityTag: "\"x\"",
            lastModified: nil, expectedLength: nil)
        var future = outside
        future.version = 99
        future.partialFileURL = downloads.appendingPathComponent("CurlewDownload-x.tmp")
        var noValidator = future
        noValidator.version = 1
        noValidator.entityTag = "W/\"weak\""
        var injected = noValidator
        injected.entityTag = "\"a\"\r\nX-Evil: 1"
        outside.headers = [:]
        let cases: [(String, Data)] = [
            ("random bytes", Data((0..<64).map { UInt8(truncatingIfNeeded: $0 &* 37) })),
            ("empty", Data()),
            ("JSON of something else", Data("{\"hello\": 1}".utf8)),
            ("a newer version", future.encoded()),
            ("a file outside the download directory", outside.encoded()),
            ("only a weak entity tag", noValidator.encoded()),
            ("a validator with CR LF", injected.encoded()),
        ]
        for (label, data) in cases {
            let (task, response) = await download { done in
                manager.downloadTask(withResumeData: data, destination: nil, completionHandler: done)
            }
            XCTAssertEqual(errorCase(response.error), "invalidResumeData", label)
            XCTAssertEqual(task.state, .completed, label)
        }
        XCTAssertEqual(server.requests.count, 0, "nothing was sent")
        XCTAssertTrue(FileManager.default.fileExists(atPath: "/etc/passwd"))
    }

    // MARK: - Failures

    func testAShortBodyWithoutAValidatorFailsAndRemovesThePartialFile() async throws {
        server.route("/short", response: .fault(.truncatedBody(declaredLength: 100_000, sentLength: 40_000)))
        let (task, response) = await download { done in
            manager.downloadTask(with: URLRequest(url: try! server.url("/short")), destination: nil, completionHandler: done)
        }
        XCTAssertEqual(errorCase(response.error), "networkLost")
        XCTAssertNil(task.resumeData)
        XCTAssertEqual(leftovers, [])
    }

    func testAShortBodyWithAValidatorLeavesResumeDataThatFinishesTheFile() async throws {
        let body = patternedData(count: 120_000)
        server.route("/file") { request in
            if request.headers.contains(where: { $0.name.lowercased() == "range" }) {
                return TestResponse(
                    status: 206,
                    headers: [("ETag", "\"v1\""), ("Content-Range", "bytes 50000-119999/120000")],
                    body: body.subdata(in: 50_000..<120_000))
            }
            // Announces the whole body, sends 50,000 bytes, closes.
            var response = TestResponse(
                status: 200, headers: [("ETag", "\"v1\""), ("Content-Length", "120000")],
                body: .data(body.subdata(in: 0..<50_000)), framing: .contentLength, ending: .close)
            response.keepAlive = false
            return response
        }
        let (task, first) = await download { done in
            manager.downloadTask(with: URLRequest(url: try! server.url("/file")), destination: nil, completionHandler: done)
        }
        XCTAssertEqual(errorCase(first.error), "networkLost")
        let data = try XCTUnwrap(task.resumeData, "a cut-off download with an entity tag can continue")
        XCTAssertEqual(try DownloadResumeData(encoded: data).bytesReceived, 50_000)
        let destination = destinations.appendingPathComponent("finished")
        let (_, second) = await download { done in
            manager.downloadTask(withResumeData: data, destination: { _, _ in destination }, completionHandler: done)
        }
        XCTAssertNil(second.error)
        XCTAssertEqual(try Data(contentsOf: destination), body)
    }

    func testAFullDiskIsAFileWriteErrorAndLeavesNothing() async throws {
        // RLIMIT_FSIZE plays the full disk: writes past 64 KiB fail with EFBIG (SIGXFSZ is
        // ignored meanwhile, so the process is not killed).
        var saved = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved), 0)
        let previousHandler = signal(SIGXFSZ, SIG_IGN)
        var limit = saved
        limit.rlim_cur = 64 * 1024
        XCTAssertEqual(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit), 0)
        defer {
            _ = setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
            signal(SIGXFSZ, previousHandler)
        }
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 500_000))
        let (_, response) = await download { done in
            manager.downloadTask(with: URLRequest(url: try! server.url("/file")), destination: nil, completionHandler: done)
        }
        guard case .fileWriteFailed(let detail)? = response.error as? SessionError else {
            return XCTFail("expected fileWriteFailed, got \(String(describing: response.error))")
        }
        XCTAssertTrue(detail.contains("too large"), detail)
        XCTAssertEqual(leftovers, [])
    }

    func testAnUnwritableDownloadDirectoryFailsBeforeSending() async throws {
        var configuration = SessionConfiguration.default
        configuration.downloadDirectory = URL(fileURLWithPath: "/proc/no-such-directory")
        let other = URLSessionManager(configuration: configuration)
        defer { other.invalidateSessionCancelingTasks(true, resetSession: false) }
        _ = RangeFileRoute(server: server, path: "/file", body: patternedData(count: 1_000))
        let (_, response) = await download { done in
            other.downloadTask(with: URLRequest(url: try! server.url("/file")), destination: nil, completionHandler: done)
        }
        XCTAssertEqual(errorCase(response.error), "fileWriteFailed")
        XCTAssertEqual(server.requests.count, 0)
    }

    // MARK: - Large bodies

    func testAGigabyteStreamsToDiskWithFlatMemoryAndExactBytes() async throws {
        let size = 1 << 30
        let streaming = try StreamingServer(bytes: size)
        let destination = destinations.appendingPathComponent("big")
        _ = MemoryStatus.resetPeak()
        let before = try XCTUnwrap(MemoryStatus.value("VmRSS"))
        let url = try await manager.download(
            for: URLRequest(url: URL(string: "http://127.0.0.1:\(streaming.port)/big")!), to: destination)
        let peak = try XCTUnwrap(MemoryStatus.value("VmHWM"))
        XCTAssertLessThan(peak - before, 64 * 1024, "peak RSS grew by \(peak - before) KB for a 1 GiB download")
        // Exact bytes: the server's pattern repeats every 65,536 bytes.
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let pattern = Data((0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        var total = 0
        while let chunk = try handle.read(upToCount: 65536), !chunk.isEmpty {
            guard chunk == pattern.prefix(chunk.count) else { return XCTFail("bytes differ near offset \(total)") }
            total += chunk.count
        }
        XCTAssertEqual(total, size)
        try FileManager.default.removeItem(at: url)
    }
}
