import CurlewTestSupport
import Foundation
import Glibc
import Security
import Serialization
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Request bodies that are slow by design (a throttled multipart body) or by nature (a
/// caller's stream waiting for its producer) never hold up the manager's other transfers:
/// the driver thread pauses their transfer instead of sleeping or blocking in a read.
final class BodyStreamTests: XCTestCase {
    var manager: URLSessionManager!

    override func setUp() { manager = URLSessionManager.raw() }

    override func tearDown() async throws {
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        manager = nil
    }

    /// Runs `count` GETs one after another on the shared manager; each must finish. A driver
    /// thread stuck in a body read would never run them: the 60 s guard turns that hang into a
    /// failure (it is not a timing assertion: the GETs take milliseconds).
    private func sequentialGets(_ count: Int) async throws {
        let done = expectation(description: "\(count) GETs")
        let url = try Peer.url("/get")
        let errors = Mutex<[String]>([])
        Task { [manager] in
            for index in 0..<count {
                let response = await manager!.response(for: URLRequest(url: url))
                if response.error != nil || response.response?.statusCode != 200 {
                    errors.withLock { $0.append("GET \(index): \(String(describing: response.error))") }
                }
            }
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: 60)
        XCTAssertEqual(errors.withLock { $0 }, [])
    }

    /// 12 packets of 1 KiB, 0.25 s apart (3 s in all). While it trickles out, 10 GETs run one
    /// after another on the same manager. Had the throttle slept on the driver thread, each
    /// GET would wait out a packet delay at every step and the upload would end first.
    func testAThrottledMultipartUploadDoesNotStallTheOtherTransfers() async throws {
        let payload = Data((0..<11_500).map { UInt8(ascii: "a") + UInt8($0 % 26) })
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: try Peer.url("/post").absoluteString, parameters: nil
        ) { form in
            form.appendPart(withFileData: payload, name: "file", fileName: "slow.txt", mimeType: "text/plain")
            form.throttleBandwidth(withPacketSize: 1024, delay: 0.25)
        }
        let finished = Mutex(false)
        let upload = Task { [manager] in
            let response: DataResponse = await withCheckedContinuation { continuation in
                manager!.uploadTask(withStreamedRequest: request) { response in
                    finished.withLock { $0 = true }
                    continuation.resume(returning: response)
                }.resume()
            }
            return response
        }
        try await sequentialGets(10)
        XCTAssertFalse(finished.withLock { $0 }, "the throttled upload ended before 10 quick GETs did")

        let response = await upload.value
        XCTAssertNil(response.error)
        let echo = try json(response.data)
        let files = try XCTUnwrap(echo["files"] as? [String: Any])
        XCTAssertEqual(files["file"] as? String, String(decoding: payload, as: UTF8.self), "every byte arrived, in order")
    }

    /// A caller's stream whose producer has written nothing yet: the upload waits, the GETs
    /// on the same manager go on, and once the producer writes (in three pieces) and closes,
    /// the server receives exactly what was written.
    func testACallerStreamWaitingForItsProducerDoesNotBlockTheDriver() async throws {
        let stream = try PipeStream()
        let pieces = (0..<3).map { piece in Data((0..<1_000).map { UInt8(ascii: "A") + UInt8(($0 + piece) % 26) }) }
        let body = pieces.reduce(Data(), +)

        var request = URLRequest(url: try Peer.url("/post"))
        request.httpMethod = "POST"
        request.httpBodyStream = stream
        request.setValue("\(body.count)", forHTTPHeaderField: "Content-Length")
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        let upload = Task { [manager] in
            let response: DataResponse = await withCheckedContinuation { continuation in
                manager!.uploadTask(withStreamedRequest: request) { continuation.resume(returning: $0) }.resume()
            }
            return response
        }

        // The producer has written nothing: a driver blocked in the stream's read would never
        // get to these (the test would hang here rather than fail, so this comes first).
        try await sequentialGets(5)

        for piece in pieces {
            XCTAssertEqual(stream.produce(piece), piece.count)
            try await sequentialGets(1)  // the upload pauses again between pieces
        }
        stream.finishProducing()

        let response = await upload.value
        XCTAssertNil(response.error)
        let echo = try json(response.data)
        XCTAssertEqual(echo["data"] as? String, String(decoding: body, as: UTF8.self))
    }

    /// The same pause and wake-up on an HTTP/2 stream (nghttpd): the upload resumes after
    /// each piece and completes with every byte sent.
    func testAWaitingStreamResumesOverHTTP2() async throws {
        let certificates = try TestCertificates.shared()
        let peer = try HTTP2Peer.shared()
        let name = "sink-\(UUID().uuidString).txt"
        try Data("stored".utf8).write(to: peer.directory.appendingPathComponent(name))
        var policy = SecurityPolicy.default
        policy.trustedRootCertificates = [try Certificate(contentsOf: certificates.root.certificatePEM)]
        try manager.setSecurityPolicy(policy)

        let stream = try PipeStream()
        let pieces = (0..<3).map { piece in Data(repeating: UInt8(ascii: "a") + UInt8(piece), count: 20_000) }
        var request = URLRequest(url: try XCTUnwrap(URL(string: "https://localhost:\(peer.port)/\(name)")))
        request.httpMethod = "POST"
        request.httpBodyStream = stream
        request.setValue("60000", forHTTPHeaderField: "Content-Length")
        let task = Mutex<SessionTask?>(nil)
        let upload = Task { [manager] in
            let response: DataResponse = await withCheckedContinuation { continuation in
                let created = manager!.uploadTask(withStreamedRequest: request) { continuation.resume(returning: $0) }
                task.withLock { $0 = created }
                created.resume()
            }
            return response
        }
        for piece in pieces {
            XCTAssertEqual(stream.produce(piece), piece.count)
            try await sequentialGets(1)
        }
        stream.finishProducing()
        let response = await upload.value
        XCTAssertNil(response.error)
        XCTAssertEqual(response.metrics?.finalTransaction?.httpVersion, "HTTP/2")
        XCTAssertEqual(task.withLock { $0?.countOfBytesSent }, 60_000)
    }

    /// A multipart body with a caller's stream part goes through the pump too, byte for byte.
    func testAMultipartBodyWithACallerStreamPartArrivesIntact() async throws {
        let part = Data((0..<300_000).map { UInt8(ascii: "a") + UInt8($0 % 26) })
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: try Peer.url("/post").absoluteString, parameters: ["kind": "stream"]
        ) { form in
            form.appendPart(
                with: InputStream(data: part), name: "file", fileName: "big.txt", length: Int64(part.count),
                mimeType: "text/plain")
        }
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(withStreamedRequest: request) { continuation.resume(returning: $0) }.resume()
        }
        XCTAssertNil(response.error)
        let echo = try json(response.data)
        let files = try XCTUnwrap(echo["files"] as? [String: Any])
        XCTAssertEqual((files["file"] as? String)?.utf8.count, part.count)
        XCTAssertEqual(files["file"] as? String, String(decoding: part, as: UTF8.self))
        XCTAssertEqual((echo["form"] as? [String: Any])?["kind"] as? String, "stream")
    }

    /// A caller's stream that fails mid-body fails the task with `.bodyStreamFailed`; the
    /// server never sees a complete request.
    /// A body stream's `Content-Length` must be digits: "-1" (a copied "unknown length") was
    /// read as a length, and the stream went out as an empty body the server took as whole.
    func testABodyStreamWithAContentLengthThatIsNoLengthIsRefused() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/upload") { request in .text("got \(request.body.count)") }
        for value in ["-1", "12abc", "", "99999999999999999999"] {
            var request = URLRequest(url: try server.url("/upload"))
            request.httpMethod = "PUT"
            request.httpBodyStream = InputStream(data: Data(repeating: 1, count: 1_000))
            request.setValue(value, forHTTPHeaderField: "Content-Length")
            let response = await manager.response(for: request)
            guard case .invalidHeader(let detail)? = response.error as? SessionError else {
                XCTFail("\(value): expected invalidHeader, got \(response.result)")
                continue
            }
            XCTAssertTrue(detail.contains("Content-Length"), detail)
        }
        XCTAssertEqual(server.requests.count, 0)
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "PUT"
        request.httpBodyStream = InputStream(data: Data(repeating: 1, count: 1_000))
        request.setValue(" 1000 ", forHTTPHeaderField: "Content-Length")
        let response = await manager.response(for: request)
        XCTAssertEqual(response.data, Data("got 1000".utf8), "\(response.result)")
    }

    /// One multipart request sent twice, one after the other and two at once: each task reads
    /// a stream of its own. The caller's stream was read by the first task, and the second found
    /// it at its end ("the body ended after 0 of N bytes").
    func testAMultipartRequestCanBeSentMoreThanOnce() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/upload") { request in .text("got \(request.body.count)") }
        let payload = Data(repeating: 9, count: 100_000)
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: try server.url("/upload").absoluteString, parameters: ["a": "b"]
        ) { form in
            form.appendPart(withFileData: payload, name: "file", fileName: "f.bin", mimeType: "application/octet-stream")
        }
        let manager: URLSessionManager = self.manager
        let first = await manager.response(for: request)
        let second = await manager.response(for: request)
        let together = await withTaskGroup(of: DataResponse.self) { group in
            for _ in 0..<2 { group.addTask { await manager.response(for: request) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        for response in [first, second] + together {
            XCTAssertNil(response.error)
            XCTAssertEqual(response.response?.statusCode, 200)
        }
        let sizes = Set(server.requests.map(\.body.count))
        XCTAssertEqual(server.requests.count, 4)
        XCTAssertEqual(sizes.count, 1, "every request carried the same body")
        XCTAssertGreaterThan(sizes.first ?? 0, payload.count)
    }

    /// The body's framing is libcurl's: a caller's `Transfer-Encoding` went out beside the
    /// `Content-Length` libcurl writes (`gzip` with a length: the pair RFC 9112 §6.2 forbids,
    /// which a server and a proxy may read two ways), and `chunked` on a bodiless GET left the
    /// server waiting for chunks.
    func testACallersTransferEncodingIsNotSent() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/framing") { request in .text("\(request.body.count)") }
        var post = URLRequest(url: try server.url("/framing"))
        post.httpMethod = "POST"
        post.httpBody = Data("hello".utf8)
        post.setValue("gzip", forHTTPHeaderField: "Transfer-Encoding")
        let posted = await manager.response(for: post)
        XCTAssertEqual(posted.response?.statusCode, 200, "\(posted.result)")
        XCTAssertEqual(posted.data.map { String(decoding: $0, as: UTF8.self) }, "5")
        var get = URLRequest(url: try server.url("/framing"))
        get.setValue("chunked", forHTTPHeaderField: "Transfer-Encoding")
        get.timeoutInterval = 5  // a bound: the server waited for chunks until the idle timeout
        let got = await manager.response(for: get)
        XCTAssertEqual(got.response?.statusCode, 200, "\(got.result)")
        let heads = server.requests.filter { $0.path == "/framing" }
        XCTAssertEqual(heads.map { $0.headerValues("Transfer-Encoding") }, [[], []])
        XCTAssertEqual(heads.first?.headerValues("Content-Length"), ["5"])
    }

    /// A caller's stream longer than its declared `Content-Length`: libcurl sent the length and
    /// the rest was dropped without a word (the server took ten bytes of a hundred for the
    /// body). The task fails with the surplus named, as an async sequence's does.
    func testAStreamLongerThanItsDeclaredLengthFails() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/count") { request in .text("\(request.body.count)") }
        var request = URLRequest(url: try server.url("/count"))
        request.httpMethod = "POST"
        request.httpBodyStream = InputStream(data: Data(repeating: 0x61, count: 100))
        request.setValue("10", forHTTPHeaderField: "Content-Length")
        let response = await manager.response(for: request)
        guard case .bodyStreamFailed(let reason)? = response.error as? SessionError else {
            return XCTFail("expected bodyStreamFailed, got \(response.result)")
        }
        XCTAssertTrue(reason.contains("longer than its declared length"), reason)
        // The same stream at its own length goes as before.
        var exact = URLRequest(url: try server.url("/count"))
        exact.httpMethod = "POST"
        exact.httpBodyStream = InputStream(data: Data(repeating: 0x61, count: 10))
        exact.setValue("10", forHTTPHeaderField: "Content-Length")
        let fine = await manager.response(for: exact)
        XCTAssertEqual(fine.data.map { String(decoding: $0, as: UTF8.self) }, "10", "\(fine.result)")
    }

    func testACallerStreamThatFailsFailsTheTask() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/upload") { request in .text("got \(request.body.count)") }
        var request = URLRequest(url: try server.url("/upload"))
        request.httpMethod = "PUT"
        request.httpBodyStream = FailingStream(goodBytes: 5_000)
        request.setValue("20000", forHTTPHeaderField: "Content-Length")
        let response: DataResponse = await withCheckedContinuation { continuation in
            manager.uploadTask(withStreamedRequest: request) { continuation.resume(returning: $0) }.resume()
        }
        guard case .bodyStreamFailed? = response.error as? SessionError else {
            return XCTFail("expected bodyStreamFailed, got \(String(describing: response.error))")
        }
        XCTAssertFalse(server.requests.contains { $0.path == "/upload" }, "an incomplete body was answered")
    }
}

/// Produces `goodBytes` bytes, then fails with an error (as a stream over a broken pipe does).
private final class FailingStream: InputStream {
    private let goodBytes: Int
    private var produced = 0
    private var failure: (any Error)?

    init(goodBytes: Int) {
        self.goodBytes = goodBytes
        super.init(data: Data())
    }

    override func open() {}
    override func close() {}
    override var hasBytesAvailable: Bool { failure == nil }
    override var streamStatus: Stream.Status { failure == nil ? .open : .error }
    override var streamError: (any Error)? { failure }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        guard produced < goodBytes else {
            failure = CocoaError(.fileReadCorruptFile)
            return -1
        }
        let count = min(len, goodBytes - produced)
        buffer.update(repeating: UInt8(ascii: "x"), count: count)
        produced += count
        return count
    }
}

/// A stream over a pipe: `read` blocks in read(2) until the test produces bytes, as a
/// stream fed by another thread, a socket or a child process does.
private final class PipeStream: InputStream {
    private let readEnd: Int32
    private let writeEnd: Int32

    init() throws {
        var descriptors: [Int32] = [0, 0]
        guard pipe(&descriptors) == 0 else { throw CocoaError(.fileReadUnknown) }
        readEnd = descriptors[0]
        writeEnd = descriptors[1]
        super.init(data: Data())
    }

    deinit {
        Glibc.close(readEnd)
        finishProducing()
    }

    /// Writes `bytes` to the pipe (they fit in its buffer); returns the count written.
    func produce(_ bytes: Data) -> Int {
        bytes.withUnsafeBytes { Glibc.write(writeEnd, $0.baseAddress, $0.count) }
    }

    /// Closes the write end: the reader sees the end of the stream.
    func finishProducing() {
        Glibc.close(writeEnd)
    }

    override func open() {}
    override func close() {}
    override var hasBytesAvailable: Bool { true }
    override var streamStatus: Stream.Status { .open }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        var result: Int
        repeat { result = Glibc.read(readEnd, buffer, len) } while result < 0 && errno == EINTR
        return result
    }
}
