import CurlewTestSupport
import Foundation
import Security
import Serialization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `SessionTask.curlDescription(showingSecrets:)`: the real `curl`, run by `/bin/sh` with the
/// description, makes httpbin echo exactly what it echoed for the Curlew task itself.
final class CurlDescriptionTests: XCTestCase {
    /// Header fields httpbin may echo differently for curl and for Curlew. None: the
    /// description suppresses curl's own `User-Agent` and `Expect`, and `--compressed` asks
    /// for the codings Curlew asks for.
    static let headersAllowedToDiffer: Set<String> = []

    private var managers: [URLSessionManager] = []

    override func tearDown() async throws {
        for manager in managers {
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            await manager.waitUntilInvalidated()
        }
        managers = []
    }

    private func makeManager(_ adjust: (inout SessionConfiguration) -> Void = { _ in }) -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        adjust(&configuration)
        let manager = URLSessionManager.raw(configuration)
        managers.append(manager)
        return manager
    }

    // MARK: - Round trips through the real curl

    func testGetWithQuery() async throws {
        let manager = makeManager()
        let base = try Peer.httpbin.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        var request = URLRequest(url: try XCTUnwrap(URL(string: base + "/anything/path?q=a%20b&list=1&list=2&quote=it's")))
        request.setValue("it's \"quoted\" $HOME `x`", forHTTPHeaderField: "X-Shell")
        let description = try await assertRoundTrip(manager) { $0.dataTask(with: request, completionHandler: $1) }
        XCTAssertFalse(description.contains("-X "), "GET is implied: \(description)")
    }

    /// A byte range is asked for as is: no `Accept-Encoding`, no `--compressed`, and curl
    /// sends what Curlew sends.
    func testARangeIsAskedForWithoutCodings() async throws {
        let manager = makeManager()
        var request = URLRequest(url: try Peer.url("/anything"))
        request.setValue("bytes=0-9", forHTTPHeaderField: "Range")
        let description = try await assertRoundTrip(manager) { $0.dataTask(with: request, completionHandler: $1) }
        XCTAssertFalse(description.contains("--compressed"), description)
        XCTAssertFalse(description.lowercased().contains("accept-encoding"), description)
        XCTAssertTrue(description.contains("-H 'Range: bytes=0-9'"), description)
    }

    func testPostJSONWithAuthorization() async throws {
        let manager = makeManager()
        var request = URLRequest(url: try Peer.url("/anything"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer s3cr3t-token", forHTTPHeaderField: "Authorization")
        request.httpBody = Data(#"{"name":"O'Brien","lines":"a\nb","n":1}"#.utf8)
        let description = try await assertRoundTrip(manager) { $0.dataTask(with: request, completionHandler: $1) }
        XCTAssertFalse(description.contains("-X "), "POST is implied by the body: \(description)")
        let masked = try XCTUnwrap(lastTask).curlDescription()
        XCTAssertFalse(masked.contains("s3cr3t-token"), masked)
        XCTAssertTrue(masked.contains("-H 'Authorization: Bearer ***'"), masked)
    }

    func testPutBinaryBodyWithQuotesNewlinesAndInvalidUTF8() async throws {
        let manager = makeManager()
        var request = URLRequest(url: try Peer.url("/anything"))
        request.httpMethod = "PUT"
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        var body = Data([0x00, 0xFF, 0xFE, 0x80])
        body += Data("it's \"q\"\n\\n %s %% $x `y`\r\n".utf8)
        body += Data([0xC3, 0x28, 0x00, 0x7F, 0x0A])
        body += Data("héllo".utf8)
        request.httpBody = body
        let (description, echo) = try await roundTrip(manager) { $0.uploadTask(with: request, from: body, completionHandler: $1) }
        XCTAssertTrue(description.hasPrefix("printf '"), description)
        XCTAssertTrue(description.contains("-X PUT"), description)
        XCTAssertTrue(description.contains("--data-binary @-"), description)
        // httpbin echoes a non-UTF-8 body as a base64 data URL: the bytes arrived unchanged.
        XCTAssertEqual(echo.curlew["data"] as? String, "data:application/octet-stream;base64," + body.base64EncodedString())
    }

    func testMultipartUploadFromAFile() async throws {
        let manager = makeManager()
        let serializer = HTTPRequestSerializer()
        let streamed = try serializer.multipartFormRequest(
            method: "POST", urlString: try Peer.url("/anything").absoluteString, parameters: ["title": "it's a test"]
        ) { form in
            form.appendPart(withFileData: Data("line 1\nline 'two'\n".utf8), name: "file", fileName: "notes.txt", mimeType: "text/plain")
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("curlew desc \(UUID().uuidString).multipart")
        addTeardownBlock { try? FileManager.default.removeItem(at: file) }
        let request = try await serializer.request(withMultipartFormRequest: streamed, writingStreamContentsToFile: file)
        let (description, echo) = try await roundTrip(manager) { $0.uploadTask(with: request, fromFile: file, completionHandler: $1) }
        XCTAssertTrue(description.contains("--data-binary " + ShellQuoting.quote("@" + file.path)), description)
        XCTAssertEqual((echo.curlew["form"] as? [String: Any])?["title"] as? String, "it's a test")
        XCTAssertEqual((echo.curlew["files"] as? [String: Any])?["file"] as? String, "line 1\nline 'two'\n")
    }

    func testCookiesFromTheJar() async throws {
        let manager = makeManager()
        // httpbin stores `session` and `lang` through Set-Cookie (and redirects to /cookies).
        let set = await manager.response(for: URLRequest(url: try Peer.url("/cookies/set?session=abc&lang=en")))
        XCTAssertNil(set.error)
        let jar = try XCTUnwrap(manager.cookieJar)
        let host = try XCTUnwrap(try Peer.httpbin.host)
        try jar.add([
            Cookie(name: "p", value: "deep", domain: host, path: "/anything"),  // longer path: sent first
            Cookie(name: "sec", value: "s", domain: host, isSecure: true),  // 127.0.0.1 is a secure context
            Cookie(name: "other", value: "no", domain: host, path: "/elsewhere"),
            Cookie(name: "foreign", value: "no", domain: "example.com"),
        ])
        let request = URLRequest(url: try Peer.url("/anything/x"))
        let (description, echo) = try await roundTrip(manager) { $0.dataTask(with: request, completionHandler: $1) }
        XCTAssertTrue(description.contains("-b 'p=deep; session=abc; lang=en; sec=s'"), description)
        XCTAssertEqual((echo.curlew["headers"] as? [String: Any])?["Cookie"] as? String, "p=deep; session=abc; lang=en; sec=s")
        let masked = try XCTUnwrap(lastTask).curlDescription()
        XCTAssertTrue(masked.contains("-b 'p=***; session=***; lang=***; sec=***'"), masked)
    }

    func testAdditionalHeadersAndACustomMethod() async throws {
        let manager = makeManager {
            $0.httpAdditionalHeaders = ["X-Team": "curlew", "Accept-Language": "fr", "X-Empty": ""]
        }
        var request = URLRequest(url: try Peer.url("/anything?x=1"))
        request.httpMethod = "DELETE"
        request.setValue("de", forHTTPHeaderField: "Accept-Language")  // the request's own wins
        request.setValue("Curlew-Test/1", forHTTPHeaderField: "User-Agent")
        let (description, echo) = try await roundTrip(manager) { $0.dataTask(with: request, completionHandler: $1) }
        XCTAssertTrue(description.contains("-X DELETE"), description)
        XCTAssertFalse(description.contains("-H 'User-Agent:'"), description)
        let headers = try XCTUnwrap(echo.curlew["headers"] as? [String: Any])
        XCTAssertEqual(headers["X-Team"] as? String, "curlew")
        XCTAssertEqual(headers["Accept-Language"] as? String, "de")
    }

    // MARK: - Secrets and quoting, without a transfer

    func testSecretsAreMaskedUnlessShown() throws {
        let manager = makeManager {
            $0.proxy = .url("http://puser:proxy-pass@127.0.0.1:3128")
            $0.proxyCredential = URLCredential(user: "cred-user", password: "cred-pass", persistence: .none)
        }
        var request = URLRequest(url: try XCTUnwrap(URL(string: "http://alice:url-pass@example.com/x")))
        request.setValue("Basic dXNlcjpwYXNz", forHTTPHeaderField: "Authorization")
        request.setValue("Basic cHJveHk6cGFzcw==", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("a=1; b=two", forHTTPHeaderField: "Cookie")
        let task = manager.dataTask(with: request, completionHandler: nil)
        let masked = task.curlDescription()
        for secret in ["dXNlcjpwYXNz", "cHJveHk6cGFzcw==", "a=1", "b=two", "url-pass", "proxy-pass", "cred-pass"] {
            XCTAssertFalse(masked.contains(secret), "\(secret) in \(masked)")
        }
        for shown in [
            "-H 'Authorization: Basic ***'", "-H 'Proxy-Authorization: Basic ***'", "-H 'Cookie: a=***; b=***'",
            "curl 'http://alice:***@example.com/x'", "-x 'http://puser:***@127.0.0.1:3128'", "-U 'cred-user:***'",
        ] {
            XCTAssertTrue(masked.contains(shown), "\(shown) missing from \(masked)")
        }
        let shown = task.curlDescription(showingSecrets: true)
        for secret in ["Basic dXNlcjpwYXNz", "Basic cHJveHk6cGFzcw==", "Cookie: a=1; b=two", "alice:url-pass@", "puser:proxy-pass@", "cred-user:cred-pass"] {
            XCTAssertTrue(shown.contains(secret), "\(secret) missing from \(shown)")
        }
        XCTAssertFalse(shown.contains("***"), shown)
    }

    /// The shell hands curl exactly the words meant: a stand-in `curl` function prints them.
    func testQuotingSurvivesQuotesInHeaderValues() throws {
        let manager = makeManager()
        var request = URLRequest(url: try XCTUnwrap(URL(string: "http://example.com/a?b='c'")))
        let tricky = #"it's 'quoted' \ "double" $HOME `cmd` ; | & *"#
        request.setValue(tricky, forHTTPHeaderField: "X-Tricky")
        request.httpMethod = "PATCH"
        request.httpBody = Data("body's text\nline two".utf8)
        let description = manager.dataTask(with: request, completionHandler: nil).curlDescription()
        let words = try shellWords(description)
        XCTAssertEqual(words.first, "http://example.com/a?b='c'")
        XCTAssertTrue(words.contains("X-Tricky: " + tricky), "\(words)")
        let dataIndex = try XCTUnwrap(words.firstIndex(of: "--data-binary"))
        XCTAssertEqual(words[dataIndex + 1], "body's text\nline two")
        XCTAssertTrue(description.contains(" \\\n  "), "one option per line: \(description)")
    }

    /// A request Curlew refuses to send is described as a shell comment, which runs nothing.
    func testARequestCurlewWouldRefuseIsAComment() throws {
        let task = makeManager().dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "ftp://example.com/f"))), completionHandler: nil)
        let description = task.curlDescription()
        XCTAssertTrue(description.hasPrefix("# Curlew would not send this request: "), description)
        XCTAssertFalse(description.contains("\n"), description)
        XCTAssertEqual(try runShell(description).status, 0)
    }

    /// curl reads `[` and `{` in a URL as a glob pattern unless told not to (an IPv6 host).
    func testBracketsInTheURLAreNotGlobbed() throws {
        let description = makeManager().dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "http://[::1]:8080/x"))), completionHandler: nil)
            .curlDescription()
        XCTAssertTrue(description.contains("--globoff"), description)
        XCTAssertEqual(try shellWords(description).first, "http://[::1]:8080/x")
    }

    /// Curlew sends a path's dot segments as given; curl needs `--path-as-is` to do the same.
    func testAPathWithDotSegmentsIsSentAsIs() throws {
        let description = makeManager().dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "http://h/notes/.."))), completionHandler: nil)
            .curlDescription()
        XCTAssertTrue(description.contains("--path-as-is"), description)
        let plain = makeManager().dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "http://h/notes/x.txt"))), completionHandler: nil)
            .curlDescription()
        XCTAssertFalse(plain.contains("--path-as-is"), plain)
    }

    func testConnectionOptions() throws {
        let files = try TLSFixture.certificates()
        let manager = makeManager {
            $0.httpVersion = .http1_1
            $0.tlsMinimumVersion = .tls1_3
            $0.certificateAuthorityFile = files.root.certificatePEM.path
            $0.unixSocketPath = "/tmp/curlew test.sock"
            $0.timeoutIntervalForResource = 30
            $0.proxyBypassList = ["localhost", "10.0.0.0/8"]
        }
        var policy = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [try TLSFixture.certificate(files.leaf)])
        policy.allowInvalidCertificates = true
        manager.securityPolicy = policy
        let description = manager.dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "https://example.com/"))), completionHandler: nil)
            .curlDescription()
        let pin = try TLSFixture.certificate(files.leaf).publicKeySHA256
        for option in [
            "--http1.1", "--tlsv1.3", "--cacert " + ShellQuoting.quote(files.root.certificatePEM.path),
            "--unix-socket '/tmp/curlew test.sock'", "--max-time 30", "--noproxy '*'",
            "--pinnedpubkey 'sha256//\(pin)'", "--insecure",
        ] {
            XCTAssertTrue(description.contains(option), "\(option) missing from \(description)")
        }
        // Over http, no TLS option; the 7-day default resource timeout is not written.
        let plain = makeManager().dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "http://example.com/"))), completionHandler: nil)
            .curlDescription()
        XCTAssertFalse(plain.contains("--tlsv"), plain)
        XCTAssertFalse(plain.contains("--max-time"), plain)
    }

    /// `--cacert` and `--pinnedpubkey` as written make curl accept the server Curlew accepted;
    /// the same description with another key's pin makes curl refuse it.
    func testPinsAndCertificateAuthorityRoundTrip() async throws {
        let files = try TLSFixture.certificates()
        let server = try TLSFixture.server(files.leaf) { _ in .json(#"{"pinned":true}"#) }
        defer { server.shutdown() }
        let manager = makeManager { $0.certificateAuthorityFile = files.root.certificatePEM.path }
        try manager.setSecurityPolicy(SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [try TLSFixture.certificate(files.leaf)]))
        let request = URLRequest(url: try server.url("/pinned"))
        let (task, response) = await run(manager) { $0.dataTask(with: request, completionHandler: $1) }
        XCTAssertNil(response.error)
        let description = task.curlDescription(showingSecrets: true)
        XCTAssertTrue(description.contains("--pinnedpubkey"), description)
        let accepted = try runShell(description)
        XCTAssertEqual(accepted.status, 0, accepted.stderr)
        XCTAssertEqual(accepted.stdout, response.data)

        let otherPin = try TLSFixture.certificate(files.leafNewKey).publicKeySHA256
        let leafPin = try TLSFixture.certificate(files.leaf).publicKeySHA256
        let refused = try runShell(description.replacingOccurrences(of: leafPin, with: otherPin))
        XCTAssertEqual(refused.status, 90, "CURLE_SSL_PINNEDPUBKEYNOTMATCH: \(refused.stderr)")
    }

    // MARK: - Helpers

    /// The task of the last `run`.
    private var lastTask: SessionTask?

    /// Runs the task `make` creates to completion.
    private func run(
        _ manager: URLSessionManager,
        _ make: (URLSessionManager, @escaping @Sendable (DataResponse) -> Void) -> SessionTask
    ) async -> (SessionTask, DataResponse) {
        let box = DescribedTaskBox()
        let response: DataResponse = await withCheckedContinuation { continuation in
            let task = make(manager) { continuation.resume(returning: $0) }
            box.task = task
            task.resume()
        }
        let task = box.task!
        lastTask = task
        return (task, response)
    }

    /// Runs the task, then its description (secrets shown) through `/bin/sh` and the real
    /// curl; returns the description and both httpbin echoes after asserting they match.
    @discardableResult
    private func roundTrip(
        _ manager: URLSessionManager,
        file: StaticString = #filePath, line: UInt = #line,
        _ make: (URLSessionManager, @escaping @Sendable (DataResponse) -> Void) -> SessionTask
    ) async throws -> (description: String, echo: (curlew: [String: Any], curl: [String: Any])) {
        let (task, response) = await run(manager, make)
        XCTAssertNil(response.error, file: file, line: line)
        XCTAssertEqual(response.response?.statusCode, 200, file: file, line: line)
        let description = task.curlDescription(showingSecrets: true)
        let result = try runShell(description)
        XCTAssertEqual(result.status, 0, "curl failed: \(result.stderr)\n\(description)", file: file, line: line)
        let curlewEcho = try json(response.data)
        let curlEcho = try json(result.stdout)
        for key in ["method", "url", "args", "data", "form", "files", "json"] {
            XCTAssertEqual(
                Self.canonical(curlewEcho[key]), Self.canonical(curlEcho[key]), "\(key) differs for\n\(description)",
                file: file, line: line)
        }
        var curlewHeaders = try XCTUnwrap(curlewEcho["headers"] as? [String: Any], file: file, line: line)
        var curlHeaders = try XCTUnwrap(curlEcho["headers"] as? [String: Any], file: file, line: line)
        for name in Self.headersAllowedToDiffer {
            curlewHeaders[name] = nil
            curlHeaders[name] = nil
        }
        XCTAssertEqual(
            Self.canonical(curlewHeaders), Self.canonical(curlHeaders), "headers differ for\n\(description)",
            file: file, line: line)
        return (description, (curlewEcho, curlEcho))
    }

    private func assertRoundTrip(
        _ manager: URLSessionManager, file: StaticString = #filePath, line: UInt = #line,
        _ make: (URLSessionManager, @escaping @Sendable (DataResponse) -> Void) -> SessionTask
    ) async throws -> String {
        try await roundTrip(manager, file: file, line: line, make).description
    }

    /// JSON text with sorted keys, for comparing echoed values (nil and NSNull alike).
    private static func canonical(_ value: Any?) -> String {
        guard let value, !(value is NSNull) else { return "null" }
        guard JSONSerialization.isValidJSONObject([value]),
            let data = try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys, .fragmentsAllowed])
        else { return "\(value)" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The words `/bin/sh` passes to `curl` for `description` (a stand-in function prints them).
    private func shellWords(_ description: String) throws -> [String] {
        let script = #"curl() { for word in "$@"; do printf '%s\0' "$word"; done; }"# + "\n" + description
        let result = try runShell(script)
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout.split(separator: 0, omittingEmptySubsequences: false).dropLast()
            .map { String(decoding: $0, as: UTF8.self) }
    }

    /// Runs `script` with `/bin/sh -c` (bounded: killed after 60 s).
    private func runShell(_ script: String) throws -> (status: Int32, stdout: Data, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        let errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-curl-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errorFile) }
        let errorHandle = try FileHandle(forWritingTo: errorFile)
        defer { try? errorHandle.close() }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = errorHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        let stderr = String(decoding: (try? Data(contentsOf: errorFile)) ?? Data(), as: UTF8.self)
        return (process.terminationStatus, stdout, stderr)
    }
}

/// Carries the task out of the continuation's closure.
private final class DescribedTaskBox: @unchecked Sendable {
    // @unchecked Sendable: written once before `resume()`, read after the completion handler
    // ran (the continuation's resume orders the two).
    var task: SessionTask?
}
