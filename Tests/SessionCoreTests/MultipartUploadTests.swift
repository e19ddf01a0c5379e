import Foundation
import Glibc
import Serialization
import Synchronization
import CurlewTestSupport
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Multipart `POST`s through `HTTPSessionManager`: parts reach httpbin intact, and a large
/// body is streamed through curl's read callback rather than loaded.
final class MultipartUploadTests: XCTestCase {
    var manager: HTTPSessionManager!
    var directory: URL!

    override func setUp() async throws {
        manager = HTTPSessionManager(baseURL: try Peer.httpbin)
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("curlew-multipart-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
        try? FileManager.default.removeItem(at: directory)
    }

    func testFilesAndFormFieldsReachHTTPBin() async throws {
        let fileURL = directory.appendingPathComponent("notes.txt")
        try Data("curlew field notes\n".utf8).write(to: fileURL)
        let uploaded = Mutex<Int64>(0)
        let (returned, outcome) = await verbOutcome { success, failure in
            manager.post(
                "post", parameters: ["name": "curlew", "meta": ["wings": 2]],
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: fileURL, name: "notes")
                    form.appendPart(withFileData: Data("a,b\n1,2\n".utf8), name: "table", fileName: "t.csv", mimeType: "text/csv")
                    form.appendPart(withFormData: Data("note".utf8), name: "kind")
                },
                progress: { progress in uploaded.withLock { $0 = max($0, progress.completedUnitCount) } },
                success: success, failure: failure)
        }
        let task = try XCTUnwrap(returned)
        XCTAssertTrue(task is UploadTask, "multipart bodies go through a streamed upload task")
        XCTAssertNil(task.originalRequest?.httpBody)
        XCTAssertNotNil(task.originalRequest?.httpBodyStream)
        let body = try XCTUnwrap(outcome.json, "\(outcome)")
        XCTAssertEqual(body["files"]?["notes"]?.stringValue, "curlew field notes\n")
        XCTAssertEqual(body["files"]?["table"]?.stringValue, "a,b\n1,2\n")
        XCTAssertEqual(body["form"]?["name"]?.stringValue, "curlew")
        XCTAssertEqual(body["form"]?["meta[wings]"]?.stringValue, "2")
        XCTAssertEqual(body["form"]?["kind"]?.stringValue, "note")
        let contentType = try XCTUnwrap(body["headers"]?["Content-Type"]?.stringValue)
        XCTAssertTrue(contentType.hasPrefix("multipart/form-data; boundary="), contentType)
        let sent = task.countOfBytesSent
        XCTAssertGreaterThan(sent, 0)
        XCTAssertEqual(body["headers"]?["Content-Length"]?.stringValue, String(sent), "an exact Content-Length")
        try await waitUntil { uploaded.withLock { $0 } == sent }
    }

    func testMissingFileFailsWithoutATask() async throws {
        let missing = directory.appendingPathComponent("absent.bin")
        let (returned, outcome) = await verbOutcome { success, failure in
            manager.post("post", parameters: nil, constructingBodyWith: { form in
                try form.appendPart(withFileURL: missing, name: "file")
            }, success: success, failure: failure)
        }
        XCTAssertNil(returned)
        guard case .failure(.none, let error) = outcome, case .multipartFileNotFound(let url)? = error as? SerializationError
        else { return XCTFail("\(outcome)") }
        XCTAssertEqual(url.lastPathComponent, "absent.bin")
    }

    func testAsyncMultipartDecodes() async throws {
        struct Echo: Decodable { let files: [String: String]; let form: [String: String] }
        let echo = try await manager.post("post", parameters: ["who": "curlew"], constructingBodyWith: { form in
            form.appendPart(withFileData: Data("payload".utf8), name: "blob", fileName: "b.bin", mimeType: "application/octet-stream")
        }, as: Echo.self)
        XCTAssertEqual(echo.form, ["who": "curlew"])
        XCTAssertEqual(echo.files["blob"], "payload")
    }

    /// 100 MB from a file, through MultipartBodyStream and curl's read callback, to a loopback
    /// sink that discards what it reads: the client's peak RSS must not grow with the body.
    func testHundredMegabyteUploadStreamsWithFlatMemory() async throws {
        try XCTSkipIf(Sanitizers.address, "AddressSanitizer's quarantine holds freed memory: resident size says nothing here")
        let size = 100 * 1024 * 1024
        let fileURL = directory.appendingPathComponent("big.bin")
        try writePatternFile(at: fileURL, size: size)
        let sink = try DiscardingSink()
        let uploader = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:\(sink.port)/"))
        defer { uploader.invalidateSessionCancelingTasks(true, resetSession: false) }

        XCTAssertTrue(MemoryStatus.resetPeak(), "needs /proc/self/clear_refs (Linux ≥ 4.0)")
        let baseline = try XCTUnwrap(MemoryStatus.value("VmRSS"))
        let (returned, outcome) = await verbOutcome { success, failure in
            uploader.post("upload", parameters: ["name": "big"], constructingBodyWith: { form in
                try form.appendPart(withFileURL: fileURL, name: "file")
            }, success: success, failure: failure)
        }
        let peak = try XCTUnwrap(MemoryStatus.value("VmHWM"))

        let task = try XCTUnwrap(returned)
        let expected = try XCTUnwrap(task.originalRequest?.value(forHTTPHeaderField: "Content-Length").flatMap { Int($0) })
        XCTAssertGreaterThan(expected, size)
        let received = try XCTUnwrap(outcome.json?["received"]?.intValue, "\(outcome)")
        XCTAssertEqual(received, expected, "the sink read exactly Content-Length bytes")
        XCTAssertEqual(sink.result?.endedWithClosingBoundary, true)
        XCTAssertEqual(task.countOfBytesSent, Int64(expected))
        let growthMB = Double(peak - baseline) / 1024
        print("100 MB multipart upload: peak RSS grew \(String(format: "%.1f", growthMB)) MB")
        XCTAssertLessThan(growthMB, 40, "the body was loaded into memory")
    }

    private func writePatternFile(at url: URL, size: Int) throws {
        XCTAssertTrue(FileManager.default.createFile(atPath: url.path, contents: nil))
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        let chunk = Data((0..<(1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        for _ in 0..<(size / chunk.count) { try handle.write(contentsOf: chunk) }
    }
}

/// A one-shot loopback HTTP/1.1 server that reads a request body of `Content-Length` bytes
/// into one reused 64 KiB buffer — storing nothing, so the server side of a memory test costs
/// no memory — and answers `{"received": <bytes>}` as JSON.
private final class DiscardingSink: Sendable {
    struct Result: Sendable {
        var received: Int
        var endedWithClosingBoundary: Bool
    }

    let port: UInt16
    private let listener: LoopbackListener
    private let outcome = Mutex<Result?>(nil)

    var result: Result? { outcome.withLock { $0 } }

    init() throws {
        listener = try LoopbackListener()
        port = listener.port
        let thread = Thread { [self] in serveOne() }
        thread.start()
    }

    private func serveOne() {
        let client = accept(listener.descriptorForServing, nil, nil)
        guard client >= 0 else { return }
        defer { close(client) }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var head: [UInt8] = []
        var bodyBytes = 0
        var tail: [UInt8] = []
        // Read until the end of the head; what follows it in the same read is body.
        while true {
            let count = recv(client, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            head += buffer[0..<count]
            if let end = Self.endOfHead(head) {
                bodyBytes = head.count - end
                tail = Array(head[end...].suffix(8))
                head = Array(head[..<end])
                break
            }
            guard head.count < 64 * 1024 else { return }
        }
        let headText = String(decoding: head, as: UTF8.self)
        let declared = headText.split(separator: "\r\n").lazy
            .compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }
            .first
        guard let declared else { return }
        while bodyBytes < declared {
            let count = recv(client, &buffer, min(buffer.count, declared - bodyBytes), 0)
            guard count > 0 else { return }
            bodyBytes += count
            tail = Array((tail + buffer[0..<count]).suffix(8))
        }
        outcome.withLock {
            $0 = Result(received: bodyBytes, endedWithClosingBoundary: tail.suffix(4) == Array("--\r\n".utf8))
        }
        let json = "{\"received\": \(bodyBytes)}"
        let response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n"
            + "Connection: close\r\n\r\n" + json
        _ = sendAll(client, Array(response.utf8))
    }

    /// The index just past "\r\n\r\n", if the head is complete.
    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index + 4
        }
        return nil
    }
}
