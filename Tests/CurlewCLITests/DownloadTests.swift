import Foundation
import XCTest
import CurlewTestSupport
@testable import CurlewCLI
#if canImport(Glibc)
import Glibc
#endif

/// `--download`: names, never replacing a file, and an interrupted download finished with
/// `--continue`, bytes compared.
final class DownloadTests: XCTestCase {
    private var base = ""
    private var directory = URL(fileURLWithPath: "/")

    override func setUpWithError() throws {
        base = try CurlewProcess.httpbin()
        directory = try CurlewProcess.temporaryDirectory()
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// httpbin's /range/N body: byte i is "a" + i % 26.
    private func rangeBytes(_ count: Int) -> Data {
        Data((0..<count).map { UInt8(ascii: "a") + UInt8($0 % 26) })
    }

    private func files() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    func testNamesFromTheURLAndNeverReplacing() throws {
        let first = try CurlewProcess.run(["-d", "\(base)/range/1000"], in: directory)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(first.stdout, Data(), "nothing on stdout")
        XCTAssertEqual(first.stderr, "curlew: saved 1000.bin (1000 bytes)\n")
        let second = try CurlewProcess.run(["-d", "\(base)/range/1000"], in: directory)
        XCTAssertEqual(second.stderr, "curlew: saved 1000.bin-1 (1000 bytes)\n")
        XCTAssertEqual(try files(), ["1000.bin", "1000.bin-1"])
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("1000.bin-1")), rangeBytes(1000))
        let mask = umask(0o022)
        umask(mask)
        let mode = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("1000.bin").path)[.posixPermissions] as? NSNumber
        XCTAssertEqual(mode?.intValue, Int(0o666 & ~mask), "a saved file is the user's, not Curlew's private partial file")
    }

    func testContentDispositionNameIsSanitised() throws {
        let disposition = "attachment; filename=\"../../escape.txt\""
        let encoded = try XCTUnwrap(disposition.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let result = try CurlewProcess.run(["-d", "\(base)/response-headers?Content-Disposition=\(encoded)"], in: directory)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try files(), ["escape.txt"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.deletingLastPathComponent().appendingPathComponent("escape.txt").path))
    }

    /// `--download --follow`: the file is named from the URL the body came from, the last of
    /// the chain (`/redirect-to?url=/range/700` saves `700.bin`), as HTTPie does.
    func testAFollowedDownloadIsNamedFromTheLastURL() throws {
        let result = try CurlewProcess.run(["-d", "-F", "\(base)/redirect-to?url=/range/700"], in: directory)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "curlew: saved 700.bin (700 bytes)\n")
        XCTAssertEqual(try files(), ["700.bin"])
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("700.bin")), rangeBytes(700))
    }

    func testAnErrorStatusSavesNothing() throws {
        let result = try CurlewProcess.run(["-d", "\(base)/status/404"], in: directory)
        XCTAssertEqual(result.status, 4)
        XCTAssertEqual(result.stderr, "curlew: error: HTTP 404 NOT FOUND: nothing saved\n")
        XCTAssertEqual(try files(), [])
    }

    /// `--download` with the request's other flags: a body from `@file` is sent (it was
    /// dropped: the download went out as a bodiless POST), `--curl` prints instead of
    /// sending (it downloaded), `--auth-type digest` answers the challenge (the 401 was saved
    /// and reported), `--headers`/`-p`/`-v` print on standard error (they were ignored).
    func testADownloadKeepsTheRequestsOtherFlags() throws {
        let body = Data("{\"photo\": \"bytes\"}".utf8)
        try body.write(to: directory.appendingPathComponent("body.json"))
        let posted = try CurlewProcess.run(["-d", "-o", "echo.json", "\(base)/post", "@body.json"], in: directory)
        XCTAssertEqual(posted.status, 0, posted.stderr)
        let echoed = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("echo.json"))) as? [String: Any]
        XCTAssertEqual(echoed?["data"] as? String, String(decoding: body, as: UTF8.self), "the file is the body")
        XCTAssertEqual((echoed?["headers"] as? [String: String])?["Content-Length"], "\(body.count)")
        // Through a symbolic link: the file's length, not the link's.
        try FileManager.default.createSymbolicLink(
            at: directory.appendingPathComponent("link.json"), withDestinationURL: directory.appendingPathComponent("body.json"))
        let linked = try CurlewProcess.run(["-d", "-o", "linked.json", "\(base)/post", "@link.json"], in: directory)
        XCTAssertEqual(linked.status, 0, linked.stderr)
        let linkedEcho = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("linked.json"))) as? [String: Any]
        XCTAssertEqual(linkedEcho?["data"] as? String, String(decoding: body, as: UTF8.self), "the linked file is the body")
        try FileManager.default.removeItem(at: directory.appendingPathComponent("link.json"))
        try FileManager.default.removeItem(at: directory.appendingPathComponent("linked.json"))

        let printed = try CurlewProcess.run(["-d", "--curl", "\(base)/range/10"], in: directory)
        XCTAssertEqual(printed.status, 0, printed.stderr)
        XCTAssertTrue(printed.text.hasPrefix("curl '\(base)/range/10'"), printed.text)
        XCTAssertEqual(try files(), ["body.json", "echo.json"], "--curl sends nothing, saves nothing")

        let digest = try CurlewProcess.run(
            ["-d", "-o", "digest.json", "-A", "digest", "-a", "ann:pw", "\(base)/digest-auth/auth/ann/pw"], in: directory)
        XCTAssertEqual(digest.status, 0, digest.stderr)
        let authenticated = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("digest.json"))) as? [String: Any]
        XCTAssertEqual(authenticated?["authenticated"] as? Bool, true)

        let headers = try CurlewProcess.run(["-d", "-o", "r.bin", "--headers", "\(base)/range/10"], in: directory)
        XCTAssertEqual(headers.status, 0, headers.stderr)
        XCTAssertTrue(headers.stderr.hasPrefix("HTTP/1.1 200 OK\n"), headers.stderr)
        XCTAssertTrue(headers.stderr.contains("\nContent-Length: 10\n"), headers.stderr)
        XCTAssertTrue(headers.stderr.hasSuffix("curlew: saved r.bin (10 bytes)\n"), headers.stderr)
        XCTAssertEqual(headers.stdout, Data(), "stdout stays clean")
        let verbose = try CurlewProcess.run(["-d", "-o", "v.bin", "-v", "\(base)/range/10"], in: directory)
        XCTAssertTrue(verbose.stderr.hasPrefix("GET /range/10 HTTP/1.1\n"), verbose.stderr)
        XCTAssertTrue(verbose.stderr.contains("\nElapsed: "), verbose.stderr)
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("v.bin")), rangeBytes(10))
    }

    /// Interrupted, a download says how to continue: the command that was run with `-c`,
    /// every flag kept (here `--follow` through a redirect, and an output in a directory of
    /// its own). It said `curlew -d -c -o NAME URL`: without the directory the resume data was
    /// not found and the whole file came again into the wrong place; without `--follow` the
    /// continuation got the redirect (the resume data holds the first URL).
    func testInterruptedDownloadIsFinishedWithContinue() throws {
        let size = 102_400
        // 100 chunks of 1 KiB over 8 s: slow enough to be interrupted after the first bytes.
        let url = "\(base)/redirect-to?url=%2Frange%2F\(size)%3Fduration%3D8%26chunk_size%3D1024"
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("sub"), withIntermediateDirectories: false)
        let process = Process()
        process.executableURL = try CurlewProcess.binary()
        process.arguments = ["-d", "--follow", "-o", "sub/big file.bin", url]
        process.currentDirectoryURL = directory
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()

        // Wait (bounded) for the first bytes in Curlew's partial file, then press Ctrl-C.
        var partialBytes = 0
        let sub = directory.appendingPathComponent("sub")
        for _ in 0..<400 where partialBytes == 0 {
            let partials = try FileManager.default.contentsOfDirectory(atPath: sub.path).filter { $0.hasPrefix("CurlewDownload-") }
            partialBytes = partials.compactMap {
                (try? FileManager.default.attributesOfItem(atPath: sub.appendingPathComponent($0).path)[.size] as? NSNumber)?.intValue
            }.max() ?? 0
            if partialBytes == 0 { usleep(50_000) }
        }
        XCTAssertGreaterThan(partialBytes, 0, "the download never started")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        let interruptedMessage = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(process.terminationStatus, 130, interruptedMessage)
        // The command to continue is one a shell runs as shown: the URL's `?` and `&`, the
        // name's space quoted.
        XCTAssertTrue(
            interruptedMessage.contains("continue with: curlew -c -d --follow -o 'sub/big file.bin' '\(url)'\n"), interruptedMessage)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sub.appendingPathComponent("big file.bin").path))
        XCTAssertTrue(FileManager.default.fileExists(atPath: sub.appendingPathComponent("big file.bin.curlew-resume").path))
        // The resume data carries the request's headers (credentials too): private to the user.
        let mode = try FileManager.default.attributesOfItem(
            atPath: sub.appendingPathComponent("big file.bin.curlew-resume").path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600, "the resume file was readable by other users")

        let suggested = try XCTUnwrap(interruptedMessage.components(separatedBy: "continue with: curlew ").last?.split(separator: "\n").first)
        let binary = try CurlewProcess.binary().path
        let resumed = try CurlewProcess.runExecutable(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "'\(binary)' " + suggested], in: directory, environment: [:])
        XCTAssertEqual(resumed.status, 0, resumed.text)
        XCTAssertEqual(try Data(contentsOf: sub.appendingPathComponent("big file.bin")), rangeBytes(size))
        XCTAssertEqual(try files(), ["sub"])
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: sub.path), ["big file.bin"], "the resume data and the partial file are gone")
        XCTAssertEqual(
            DownloadRun.continuationCommand(arguments: ["-d", "-a", "ann:pw", "--auth=x:y", "-dc", "https://h/f"], name: nil),
            "curlew -d -a USER:PASSWORD --auth=USER:PASSWORD -dc https://h/f", "credentials are not shown; -c once")
        XCTAssertEqual(
            DownloadRun.continuationCommand(arguments: ["request", "-d", "https://h/f"], name: URL(fileURLWithPath: "/tmp/f.bin")),
            "curlew request -c -o f.bin -d https://h/f", "the subcommand stays first")
        XCTAssertEqual(
            DownloadRun.continuationCommand(
                arguments: ["-d", "https://ann:pw@h/f", "Authorization:Bearer s3", "cookie:sid=1", "X-Plain:kept", "q==a@b", "https://h?x=a@b"],
                name: nil),
            "curlew -c -d https://USER:PASSWORD@h/f Authorization:VALUE cookie:VALUE X-Plain:kept q==a@b 'https://h?x=a@b'",
            "no credential in a header item or a URL is shown")
    }

    /// A server whose first answer announces 10,000 bytes, sends 4,000 and closes (cut off),
    /// and which answers a `Range` with the rest (ETag "v1").
    private static func cutThenRangeServer() throws -> (Data, TestServer) {
        let body = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let server = try TestServer { request in
            let range = request.headers.first { $0.name.lowercased() == "range" }?.value
            guard let range, range.hasPrefix("bytes="), let start = Int(range.dropFirst(6).prefix { $0 != "-" }) else {
                return TestResponse(
                    status: 200, headers: [("Content-Length", "\(body.count)"), ("ETag", "\"v1\""), ("Accept-Ranges", "bytes")],
                    body: .data(body.prefix(4_000)), framing: .contentLength, ending: .close)
            }
            return TestResponse(
                status: 206, headers: [("Content-Range", "bytes \(start)-\(body.count - 1)/\(body.count)"), ("ETag", "\"v1\"")],
                body: body.suffix(from: start))
        }
        return (body, server)
    }

    func testADownloadCutOffByTheNetworkIsFinishedWithContinue() throws {
        let (body, server) = try Self.cutThenRangeServer()
        defer { server.shutdown() }
        let url = "http://127.0.0.1:\(server.port)/file"
        let cut = try CurlewProcess.run(["-d", "-o", "file.bin", url], in: directory)
        XCTAssertEqual(cut.status, 1, cut.stderr)
        XCTAssertTrue(cut.stderr.contains("(kept for --continue: file.bin.curlew-resume)"), cut.stderr)
        // Resume data that is not the user's own — another user's (tests run as root), open to
        // others' writes, or a link — is refused and left as it is: planted in a shared
        // directory, it could name one of the user's files as the partial file (until
        // 2026-11-28 it was read whoever owned it).
        let stored = directory.appendingPathComponent("file.bin.curlew-resume")
        let original = try Data(contentsOf: stored)
        for plant in ["another user's", "writable by others", "a link"] {
            switch plant {
            case "another user's": XCTAssertEqual(chown(stored.path, 65534, 65534), 0)
            case "writable by others": XCTAssertEqual(chmod(stored.path, 0o666), 0)
            default:
                let real = directory.appendingPathComponent("real.curlew-resume")
                try FileManager.default.moveItem(at: stored, to: real)
                try FileManager.default.createSymbolicLink(at: stored, withDestinationURL: real)
            }
            let refused = try CurlewProcess.run(["-d", "-c", "-o", "file.bin", url], in: directory)
            XCTAssertEqual(refused.status, 1, "\(plant): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("not resume data of this user's own") || refused.stderr.contains("cannot read"),
                          "\(plant): \(refused.stderr)")
            // Put the user's own file back for the next case.
            try? FileManager.default.removeItem(at: stored)
            try? FileManager.default.removeItem(at: directory.appendingPathComponent("real.curlew-resume"))
            _ = FileManager.default.createFile(atPath: stored.path, contents: original, attributes: [.posixPermissions: 0o600])
        }
        let resumed = try CurlewProcess.run(["-d", "-c", "-o", "file.bin", url], in: directory)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("file.bin")), body)
        XCTAssertEqual(server.requests.last?.headers.first { $0.name.lowercased() == "range" }?.value, "bytes=4000-")
        XCTAssertEqual(try files(), ["file.bin"])
    }

    /// The continuation sends this run's header fields, not the cut run's: a header of that
    /// run (a `--session`'s among them, which this run's scope would keep at its origin) is not
    /// sent on, and a token typed now is. The stored request's fields went as they were.
    func testContinueSendsThisRunsHeadersNotTheCutRuns() throws {
        let (body, server) = try Self.cutThenRangeServer()
        defer { server.shutdown() }
        let url = "http://127.0.0.1:\(server.port)/file"
        let cut = try CurlewProcess.run(["-d", "-o", "file.bin", url, "X-Secret:s3cret", "X-Token:old"], in: directory)
        XCTAssertEqual(cut.status, 1, cut.stderr)
        let resumed = try CurlewProcess.run(["-d", "-c", "-o", "file.bin", url, "X-Token:new"], in: directory)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("file.bin")), body)
        let last = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(last.headers.first { $0.name.lowercased() == "range" }?.value, "bytes=4000-")
        XCTAssertEqual(last.headers.first { $0.name.lowercased() == "x-token" }?.value, "new")
        XCTAssertNil(last.headers.first { $0.name.lowercased() == "x-secret" }, "the cut run's header was sent on")
    }

    /// An unpinned `-d --follow` whose answer is a 3xx Curlew does not follow (a 300 naming an
    /// `http:` URL) reports that status, exit 3, without the hint to add `--follow` (given) and
    /// without the pinned run's message.
    func testAnUnfollowedRedirectOfAFollowingDownloadReportsItsStatus() throws {
        let server = try TestServer { _ in TestResponse(status: 300, headers: [("Location", "http://127.0.0.1:9/elsewhere")]) }
        defer { server.shutdown() }
        let result = try CurlewProcess.run(["-d", "--follow", "http://127.0.0.1:\(server.port)/choices"], in: directory)
        XCTAssertEqual(result.status, 3, result.stderr)
        XCTAssertTrue(result.stderr.contains("HTTP 300"), result.stderr)
        XCTAssertFalse(result.stderr.contains("pins") || result.stderr.contains("add --follow"), result.stderr)
    }

    func testContinueAdoptsAPartialFileAnotherToolLeft() throws {
        // The first 4,000 bytes, as `curl -o` would have left them when cut off.
        try rangeBytes(10_000).prefix(4_000).write(to: directory.appendingPathComponent("part.bin"))
        let result = try CurlewProcess.run(["-d", "-c", "-o", "part.bin", "\(base)/range/10000"], in: directory)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("part.bin")), rangeBytes(10_000))
        XCTAssertEqual(try files(), ["part.bin"])

        let again = try CurlewProcess.run(["-d", "-c", "-o", "part.bin", "\(base)/range/10000"], in: directory)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(again.stderr, "curlew: part.bin is already complete (10000 bytes)\n")
    }

    /// Only a GET's answer is continued: `-c` with a POST (or a body) is refused before anything
    /// is sent and the file is left as it is. It was probed with HEAD and continued with a GET
    /// carrying the POST's fields: another request's bytes.
    func testContinueRefusesARequestThatIsNotAPlainGET() throws {
        let part = directory.appendingPathComponent("part.bin")
        try rangeBytes(10_000).prefix(4_000).write(to: part)
        for arguments in [["POST", "\(base)/anything", "a=b"], ["\(base)/anything", "a=b"], ["PUT", "\(base)/anything"]] {
            let refused = try CurlewProcess.run(["-d", "-c", "-o", "part.bin"] + arguments, in: directory)
            XCTAssertEqual(refused.status, 64, "\(arguments): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("--continue continues a GET's answer"), refused.stderr)
        }
        XCTAssertEqual(try Data(contentsOf: part), rangeBytes(10_000).prefix(4_000))
        XCTAssertEqual(try files(), ["part.bin"])
    }

    func testContinueLeavesAFileAloneWithoutAValidator() throws {
        // httpbin's /bytes has no ETag or Last-Modified: nothing proves the file is a part of it.
        try Data("abc".utf8).write(to: directory.appendingPathComponent("other.bin"))
        let result = try CurlewProcess.run(["-d", "-c", "-o", "other.bin", "\(base)/bytes/100"], in: directory)
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.hasPrefix("curlew: error: the server sends no ETag or Last-Modified"), result.stderr)
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("other.bin")), Data("abc".utf8), "left alone")
        XCTAssertEqual(try files(), ["other.bin"])
    }
}
