import CurlewTestSupport
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Checks the in-process `TestServer` itself, using blocking POSIX sockets (and the `curl` / `openssl`
/// command-line tools for TLS) so that no Curlew code is involved.
final class TestServerSelfTests: XCTestCase {
    private var servers: [TestServer] = []

    override func tearDown() {
        for server in servers {
            server.shutdown()
        }
        servers = []
        super.tearDown()
    }

    private func makeServer(
        tls: TestServerTLS? = nil,
        fault: TestServerFault? = nil,
        keepAlive: Bool = true
    ) throws -> TestServer {
        let server = try TestServer(tls: tls, fault: fault, keepAlive: keepAlive)
        servers.append(server)
        return server
    }

    // MARK: - HTTP routes

    func testRouteKeepAliveAndRecording() throws {
        let server = try makeServer()
        server.route("/hello") { request in
            .text("hi \(request.queryItems.first { $0.name == "name" }?.value ?? "?")")
        }
        let client = try RawClient(port: server.port)
        let get = "GET /hello?name=a%20b HTTP/1.1\r\nHost: x\r\nX-Test: 1\r\n\r\n"
        client.send(get)
        let first = client.readResponse()
        XCTAssertTrue(first.hasPrefix("HTTP/1.1 200 OK\r\n"), first)
        XCTAssertTrue(first.contains("Content-Length: 6\r\n"), first)
        XCTAssertTrue(first.hasSuffix("\r\n\r\nhi a b"), first)

        client.send(get)
        XCTAssertTrue(client.readResponse().hasSuffix("hi a b"))

        XCTAssertEqual(server.acceptedConnectionCount, 1)
        let requests = server.requests
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(requests.map(\.connectionID), [1, 1])
        XCTAssertEqual(requests.first?.method, "GET")
        XCTAssertEqual(requests.first?.path, "/hello")
        XCTAssertEqual(requests.first?.query, "name=a%20b")
        XCTAssertEqual(requests.first?.header("x-test"), "1")
        XCTAssertEqual(server.recordedApplicationBytes, 2 * get.utf8.count)
        XCTAssertEqual(server.connections.first?.requestCount, 2)
    }

    func testBodiesMethodsAndNotFound() throws {
        let server = try makeServer()
        server.route("/echo", method: "POST") { request in
            TestResponse(status: 201, headers: [("X-Len", "\(request.body.count)")], body: request.body)
        }
        let client = try RawClient(port: server.port)
        client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        let posted = client.readResponse()
        XCTAssertTrue(posted.hasPrefix("HTTP/1.1 201 Created\r\n"), posted)
        XCTAssertTrue(posted.hasSuffix("abcde"), posted)

        client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(client.readResponse().hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        XCTAssertEqual(server.requests.first?.bodyString, "abcde")
    }

    func testStreamedChunkedResponseWithDelays() throws {
        let server = try makeServer()
        server.route(
            "/stream",
            response: .stream([
                .init(Data("one".utf8)),
                .init(Data("two".utf8), delay: .milliseconds(60)),
                .init(Data("three".utf8), delay: .milliseconds(60)),
            ])
        )
        let client = try RawClient(port: server.port)
        let start = ContinuousClock.now
        client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = client.read { $0.hasSuffix("0\r\n\r\n") }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(110))
        XCTAssertTrue(response.contains("Transfer-Encoding: chunked\r\n"), response)
        XCTAssertTrue(response.hasSuffix("\r\n\r\n3\r\none\r\n3\r\ntwo\r\n5\r\nthree\r\n0\r\n\r\n"), response)
    }

    func testKeepAliveOffAndCloseDelimited() throws {
        let server = try makeServer(keepAlive: false)
        server.route("/eof", response: TestResponse(status: 200, body: .data(Data("all".utf8)), framing: .closeDelimited))
        let client = try RawClient(port: server.port)
        client.send("GET /eof HTTP/1.1\r\nHost: x\r\n\r\n")
        let result = client.readToEnd()
        XCTAssertEqual(result.end, .eof)
        XCTAssertTrue(result.text.contains("Connection: close\r\n"), result.text)
        XCTAssertFalse(result.text.contains("Content-Length"), result.text)
        XCTAssertTrue(result.text.hasSuffix("\r\n\r\nall"), result.text)
    }

    func testExpectContinueAndRespondBeforeBody() throws {
        let server = try makeServer()
        server.route("/upload") { .text("got \($0.body.count)") }
        server.route("/early", respondBeforeBody: true) { _ in .text("too big", status: 413) }

        let client = try RawClient(port: server.port)
        client.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        XCTAssertEqual(client.read { $0.hasSuffix("\r\n\r\n") }, "HTTP/1.1 100 Continue\r\n\r\n")
        client.send("abcd")
        XCTAssertTrue(client.readResponse().hasSuffix("got 4"))

        let early = try RawClient(port: server.port)
        early.send("PUT /early HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n")
        let response = early.readResponse()
        XCTAssertTrue(response.hasPrefix("HTTP/1.1 413 Payload Too Large\r\n"), response)
    }

    func testRouteOptionsDelayAndCloseAfterHeaders() throws {
        let server = try makeServer()
        var slow = TestResponse.text("late")
        slow.delayBeforeHead = .milliseconds(150)
        server.route("/slow", response: slow)
        var headOnly = TestResponse(status: 200, headers: [("Content-Length", "10")])
        headOnly.closeAfterHeaders = true
        server.route("/head-only", response: headOnly)

        let client = try RawClient(port: server.port)
        let start = ContinuousClock.now
        client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(client.readResponse().hasSuffix("late"))
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(140))

        let second = try RawClient(port: server.port)
        second.send("GET /head-only HTTP/1.1\r\nHost: x\r\n\r\n")
        let result = second.readToEnd()
        XCTAssertEqual(result.end, .eof)
        XCTAssertTrue(result.text.hasSuffix("Content-Length: 10\r\n\r\n"), result.text)
    }

    // MARK: - Server-wide faults

    func testServerWideSocketFaults() throws {
        let closing = try makeServer(fault: .closeImmediately)
        let closed = try RawClient(port: closing.port).readToEnd()
        XCTAssertEqual(closed.end, .eof)
        XCTAssertTrue(closed.text.isEmpty)

        let resetting = try makeServer(fault: .resetImmediately)
        let reset = try RawClient(port: resetting.port).readToEnd()
        XCTAssertEqual(reset.end, .reset)

        let silent = try makeServer(fault: .acceptAndNeverRespond)
        let client = try RawClient(port: silent.port, timeout: 0.3)
        client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(client.readToEnd().end, .timeout)
        // The server records the bytes on its own thread: wait for them instead of assuming
        // 0.3 s was enough for it to run.
        XCTAssertTrue(silent.wait { $0.recordedApplicationBytes == 27 }, "\(silent.recordedApplicationBytes)")
        XCTAssertEqual(silent.requests.count, 0)

        let raw = try makeServer(fault: .respondWithRawBytes(Data("HTTP/9.9 abc\r\n\r\n".utf8)))
        let rawClient = try RawClient(port: raw.port)
        rawClient.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        let rawResult = rawClient.readToEnd()
        XCTAssertEqual(rawResult.end, .eof)
        XCTAssertEqual(rawResult.text, "HTTP/9.9 abc\r\n\r\n")
    }

    func testServerWideResponseFaults() throws {
        let truncating = try makeServer(fault: .truncatedBody(declaredLength: 100, sentLength: 10))
        let client = try RawClient(port: truncating.port)
        client.send("GET /anything HTTP/1.1\r\nHost: x\r\n\r\n")
        let truncated = client.readToEnd()
        XCTAssertEqual(truncated.end, .eof)
        XCTAssertTrue(truncated.text.contains("Content-Length: 100\r\n"), truncated.text)
        XCTAssertTrue(truncated.text.hasSuffix("\r\n\r\naaaaaaaaaa"), truncated.text)

        let trickling = try makeServer(fault: .slowBody(chunk: Data("x".utf8), interval: .milliseconds(50), count: 4))
        let slowClient = try RawClient(port: trickling.port)
        let start = ContinuousClock.now
        slowClient.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        let slow = slowClient.readResponse()
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(190))
        XCTAssertTrue(slow.contains("Content-Length: 4\r\n"), slow)
        XCTAssertTrue(slow.hasSuffix("xxxx"), slow)
    }

    // MARK: - Per-route faults

    func testPerRouteFaults() throws {
        let server = try makeServer()
        server.route("/reset") { _ in .fault(.resetImmediately) }
        server.route("/close") { _ in .fault(.closeImmediately) }
        server.route("/mid-reset") { _ in
            TestResponse(status: 200, headers: [("Content-Length", "100")], body: .data(Data("part".utf8)),
                         ending: .reset)
        }
        server.route("/no-terminator") { _ in
            TestResponse(status: 200, body: .stream([.init(Data("abc".utf8))]), ending: .close)
        }

        let resetClient = try RawClient(port: server.port)
        resetClient.send("GET /reset HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(resetClient.readToEnd().end, .reset)

        let closeClient = try RawClient(port: server.port)
        closeClient.send("GET /close HTTP/1.1\r\nHost: x\r\n\r\n")
        let closed = closeClient.readToEnd()
        XCTAssertEqual(closed.end, .eof)
        XCTAssertEqual(closed.text, "")

        let midClient = try RawClient(port: server.port)
        midClient.send("GET /mid-reset HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(midClient.readToEnd().end, .reset)

        let chunkClient = try RawClient(port: server.port)
        chunkClient.send("GET /no-terminator HTTP/1.1\r\nHost: x\r\n\r\n")
        let chunked = chunkClient.readToEnd()
        XCTAssertEqual(chunked.end, .eof)
        XCTAssertTrue(chunked.text.hasSuffix("\r\n\r\n3\r\nabc\r\n"), chunked.text)

        XCTAssertEqual(server.requests.map(\.path), ["/reset", "/close", "/mid-reset", "/no-terminator"])
        XCTAssertTrue(server.waitForAllConnectionsClosed())
    }

    // MARK: - Lifecycle

    func testShutdownClosesConnectionsAndIsIdempotent() throws {
        let server = try TestServer()
        let client = try RawClient(port: server.port)
        XCTAssertTrue(server.waitForConnections(count: 1))
        server.shutdown()
        server.shutdown()
        XCTAssertEqual(client.readToEnd().end, .eof)
        XCTAssertThrowsError(try RawClient(port: server.port))
        XCTAssertEqual(try server.url("/a?b=1").absoluteString, "http://127.0.0.1:\(server.port)/a?b=1")
        XCTAssertThrowsError(try server.url("no-slash"))
    }

    // MARK: - TLS

    func testTLSRecordsHandshakesAndDecryptedBytes() throws {
        let certificate = try SelfSignedCertificate.make()
        let server = try makeServer(
            tls: TestServerTLS(certificateChainPath: certificate.certificatePath, privateKeyPath: certificate.keyPath)
        )
        server.route("/hello", response: .text("secure"))
        XCTAssertEqual(server.baseURL.absoluteString, "https://127.0.0.1:\(server.port)")

        let ok = try runCurl(["--cacert", certificate.certificatePath, "\(server.baseURLString)/hello"])
        XCTAssertEqual(ok.status, 0, ok.output)
        XCTAssertEqual(ok.output, "secure")
        XCTAssertEqual(server.handshakeCount, 1)
        XCTAssertEqual(server.connections.first?.negotiatedALPN, "http/1.1")
        XCTAssertEqual(server.connections.first?.clientCertificatePresented, false)
        XCTAssertTrue(String(decoding: server.connections.first?.receivedBytes ?? Data(), as: UTF8.self)
            .hasPrefix("GET /hello HTTP/1.1\r\n"))

        // A client that rejects the certificate sends no application bytes.
        let rejecting = try makeServer(
            tls: TestServerTLS(certificateChainPath: certificate.certificatePath, privateKeyPath: certificate.keyPath)
        )
        let rejected = try runCurl(["\(rejecting.baseURLString)/hello"])
        XCTAssertNotEqual(rejected.status, 0)
        XCTAssertTrue(rejecting.waitForAllConnectionsClosed())
        XCTAssertEqual(rejecting.acceptedConnectionCount, 1)
        XCTAssertEqual(rejecting.handshakeCount, 0)
        XCTAssertEqual(rejecting.recordedApplicationBytes, 0)
    }

    func testMutualTLSRequiresClientCertificate() throws {
        let serverCertificate = try SelfSignedCertificate.make()
        let clientCertificate = try SelfSignedCertificate.make()
        let server = try makeServer(
            tls: TestServerTLS(
                certificateChainPath: serverCertificate.certificatePath,
                privateKeyPath: serverCertificate.keyPath,
                trustRootsPath: clientCertificate.certificatePath,
                clientCertificateVerification: .required
            )
        )
        server.route("/who", response: .text("mtls"))
        let url = "\(server.baseURLString)/who"

        let without = try runCurl(["--cacert", serverCertificate.certificatePath, url])
        XCTAssertNotEqual(without.status, 0)
        XCTAssertEqual(server.handshakeCount, 0)
        XCTAssertEqual(server.recordedApplicationBytes, 0)

        let with = try runCurl([
            "--cacert", serverCertificate.certificatePath,
            "--cert", clientCertificate.certificatePath, "--key", clientCertificate.keyPath, url,
        ])
        XCTAssertEqual(with.status, 0, with.output)
        XCTAssertEqual(with.output, "mtls")
        XCTAssertEqual(server.handshakeCount, 1)
        XCTAssertEqual(server.connections.last?.clientCertificatePresented, true)
    }

    func testFaultsOverTLS() throws {
        let certificate = try SelfSignedCertificate.make()
        let tls = TestServerTLS(certificateChainPath: certificate.certificatePath, privateKeyPath: certificate.keyPath)
        let server = try makeServer(tls: tls)
        server.route("/truncated") { _ in .fault(.truncatedBody(declaredLength: 100, sentLength: 10)) }
        server.route("/unclean") { _ in
            TestResponse(status: 200, body: .data(Data("eof".utf8)), framing: .closeDelimited,
                         ending: .closeWithoutTLSShutdown)
        }
        let truncated = try runCurl(["--cacert", certificate.certificatePath, "\(server.baseURLString)/truncated"])
        XCTAssertEqual(truncated.status, 18)  // CURLE_PARTIAL_FILE
        XCTAssertEqual(truncated.output, String(repeating: "a", count: 10))
        let unclean = try runCurl(["--cacert", certificate.certificatePath, "\(server.baseURLString)/unclean"])
        XCTAssertEqual(unclean.output, "eof")

        // Server-wide socket faults act before TLS: the handshake itself fails.
        let closing = try makeServer(tls: tls, fault: .closeImmediately)
        let closed = try runCurl(["--cacert", certificate.certificatePath, "\(closing.baseURLString)/"])
        XCTAssertEqual(closed.status, 35)  // CURLE_SSL_CONNECT_ERROR
        XCTAssertEqual(closing.handshakeCount, 0)
    }

    // MARK: - HTTPBin

    func testHTTPBinWhenAvailable() throws {
        let base: URL
        do {
            base = try HTTPBin.baseURL
        } catch HTTPBinError.unavailable(let message) {
            throw XCTSkip(message)
        }
        let port = try XCTUnwrap(base.port)
        let client = try RawClient(port: port, timeout: 10)
        client.send("GET /status/418 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let response = client.readToEnd().text
        XCTAssertTrue(response.hasPrefix("HTTP/1.1 418"), response)
    }

    // MARK: - Helpers

    private func runCurl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let curl = "/usr/bin/curl"
        guard FileManager.default.isExecutableFile(atPath: curl) else {
            throw XCTSkip("curl command-line tool not installed")
        }
        return try runCommand(curl, ["--silent", "--show-error", "--http1.1", "--max-time", "10"] + arguments)
    }
}

/// Runs a command and returns its exit status and standard output.
private func runCommand(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// A throwaway self-signed certificate for `127.0.0.1`, made with the `openssl` command-line tool.
private struct SelfSignedCertificate {
    let certificatePath: String
    let keyPath: String

    static func make() throws -> SelfSignedCertificate {
        let openssl = "/usr/bin/openssl"
        guard FileManager.default.isExecutableFile(atPath: openssl) else {
            throw XCTSkip("openssl command-line tool not installed")
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("curlew-testserver-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificate = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let result = try runCommand(openssl, [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ])
        guard result.status == 0 else {
            throw XCTSkip("openssl could not make a certificate")
        }
        return SelfSignedCertificate(certificatePath: certificate, keyPath: key)
    }
}

/// `send(2)` without `SIGPIPE`; a free function so that `RawClient.send(_:)` does not shadow it.
private func sendBytes(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    #if canImport(Darwin)
    return send(fd, bytes, count, 0)
    #else
    return send(fd, bytes, count, Int32(MSG_NOSIGNAL))
    #endif
}

/// A blocking TCP client on `127.0.0.1` with a receive timeout, for talking to the server byte by byte.
private final class RawClient {
    enum End: Equatable {
        case eof, reset, timeout, otherError
    }

    struct ConnectError: Error {
        let code: Int32
    }

    private let fd: Int32
    private var buffer = Data()

    /// `timeout` bounds each read (SO_RCVTIMEO). The default is generous for a loaded CI
    /// machine; a test that expects silence passes a short one.
    init(port: Int, timeout: Double = 30) throws {
        #if canImport(Darwin)
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #else
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard fd >= 0 else { throw ConnectError(code: errno) }
        var receiveTimeout = timeval()
        receiveTimeout.tv_sec = .init(timeout)
        receiveTimeout.tv_usec = .init((timeout - timeout.rounded(.down)) * 1e6)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receiveTimeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw ConnectError(code: code)
        }
    }

    deinit {
        close(fd)
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { sendBytes(fd, $0.baseAddress, $0.count) }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// Reads once; returns how the read ended if it produced no bytes.
    private func readOnce() -> End? {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer.append(contentsOf: chunk[0..<count])
            return nil
        }
        if count == 0 { return .eof }
        switch errno {
        case ECONNRESET: return .reset
        case EAGAIN, EWOULDBLOCK: return .timeout
        default: return .otherError
        }
    }

    /// Reads until `done` holds for everything received so far (or the connection ends); consumes it.
    func read(until done: (String) -> Bool) -> String {
        while !done(String(decoding: buffer, as: UTF8.self)) {
            if readOnce() != nil { break }
        }
        defer { buffer = Data() }
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Reads one response framed by `Content-Length` (and nothing after it).
    func readResponse() -> String {
        read { text in
            guard let headEnd = text.range(of: "\r\n\r\n") else { return false }
            let head = text[..<headEnd.lowerBound].lowercased()
            guard let lengthLine = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                  let length = Int(lengthLine.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
            else { return true }
            return text.utf8.count - text[..<headEnd.upperBound].utf8.count >= length
        }
    }

    /// Reads until EOF, reset, timeout or error.
    func readToEnd() -> (text: String, end: End) {
        var end: End?
        while end == nil {
            end = readOnce()
        }
        defer { buffer = Data() }
        return (String(decoding: buffer, as: UTF8.self), end ?? .otherError)
    }
}
