import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest
import CurlewTestSupport

/// The built `curlew` binary against httpbin: stdout, stderr and exit codes, with stdout a
/// pipe (so the body comes alone, byte for byte, unless a flag asks for more).
final class EndToEndTests: XCTestCase {
    private var base = ""
    private var directory = URL(fileURLWithPath: "/")

    override func setUpWithError() throws {
        base = try CurlewProcess.httpbin()
        directory = try CurlewProcess.temporaryDirectory()
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private func run(_ arguments: [String], environment: [String: String] = [:], file: StaticString = #filePath, line: UInt = #line) throws -> CurlewRun {
        try CurlewProcess.run(arguments, in: directory, environment: environment, file: file, line: line)
    }

    private func json(_ run: CurlewRun, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let object = try? JSONSerialization.jsonObject(with: run.stdout) as? [String: Any]
        return try XCTUnwrap(object, "stdout is not a JSON object: \(run.text.prefix(300)) / stderr: \(run.stderr)", file: file, line: line)
    }

    // MARK: Grammar

    /// Standard output that cannot take the body (a full disk: /dev/full) fails the run with
    /// exit 1 and says why. The failed writes were ignored: exit 0, the body lost, and a
    /// stream to a closed pipe downloaded to its end.
    func testAnOutputThatCannotBeWrittenFailsTheRun() throws {
        let binary = try CurlewProcess.binary()
        let result = try CurlewProcess.runExecutable(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "exec \"$0\" \"$1\" > /dev/full", binary.path, "\(base)/range/1000"],
            in: directory)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("cannot write standard output"), result.stderr)
    }

    /// `--pretty=colors` on a pipe colours the JSON body as it says (the body streamed raw,
    /// only the head coloured).
    func testColoursOnAPipeColourTheJSONBody() throws {
        let result = try run(["--pretty=colors", "\(base)/json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.text.contains("\u{1B}["), "no colour in \(result.text.prefix(200))")
    }

    /// `-d -o` naming a FIFO (or a device, as root `/dev/null`) is refused before anything is
    /// sent: the download is moved into place as a new file, which replaced the FIFO.
    func testADownloadToASpecialFileIsRefused() throws {
        let fifo = directory.appendingPathComponent("fifo")
        XCTAssertEqual(mkfifo(fifo.path, 0o600), 0)
        let result = try run(["-d", "-o", "fifo", "\(base)/range/100"])
        XCTAssertEqual(result.status, 64, result.stderr)
        XCTAssertTrue(result.stderr.contains("not a regular file"), result.stderr)
        var status = stat()
        XCTAssertEqual(lstat(fifo.path, &status), 0)
        XCTAssertEqual(status.st_mode & S_IFMT, S_IFIFO, "the FIFO was replaced")
    }

    /// A body from a pipe (`@<(command)`) goes whole, to a download and to the terminal: it
    /// went out empty with `-d` (the length stat gives a pipe, 0), and was refused without.
    func testABodyFromAPipeIsSentWhole() throws {
        let binary = try CurlewProcess.binary()
        for download in [true, false] {
            let flags = download ? "-d -o echoed.json" : ""
            let result = try CurlewProcess.runExecutable(
                URL(fileURLWithPath: "/bin/bash"),
                ["-c", "\"$0\" \(flags) POST \"$1\"/post @<(printf hello)", binary.path, base], in: directory)
            XCTAssertEqual(result.status, 0, result.stderr)
            let body = download ? try Data(contentsOf: directory.appendingPathComponent("echoed.json")) : result.stdout
            let echoed = try XCTUnwrap(try? JSONSerialization.jsonObject(with: body) as? [String: Any], "download: \(download)")
            XCTAssertEqual(echoed["data"] as? String, "hello", "download: \(download)")
        }
    }

    func testDataItemsArePostedAsJSON() throws {
        let result = try run(["\(base)/post", "name=Curlew", "stars:=5", "tags:=[\"a\",\"b\"]", "X-Demo:yes", "q==1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        let echoed = try json(result)
        XCTAssertEqual(echoed["json"] as? NSDictionary, ["name": "Curlew", "stars": 5, "tags": ["a", "b"]] as NSDictionary)
        XCTAssertEqual((echoed["headers"] as? [String: String])?["X-Demo"], "yes")
        XCTAssertEqual((echoed["headers"] as? [String: String])?["Content-Type"], "application/json")
        XCTAssertEqual((echoed["args"] as? [String: String])?["q"], "1")
    }

    func testMethodQueryEmptyHeaderAndShorthandURL() throws {
        let url = try XCTUnwrap(URL(string: base))
        guard url.host == "127.0.0.1" || url.host == "localhost", let port = url.port else {
            throw XCTSkip("httpbin is not on this machine's loopback")
        }
        let result = try run(["DELETE", ":\(port)/delete", "x==a b", "X-Empty:"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let echoed = try json(result)
        XCTAssertEqual((echoed["args"] as? [String: String])?["x"], "a b")
        XCTAssertEqual((echoed["headers"] as? [String: String])?["X-Empty"], "")
    }

    func testFormMultipartAndBodyFromFile() throws {
        try Data("hello file".utf8).write(to: directory.appendingPathComponent("note.txt"))
        try Data("{\"whole\":true}".utf8).write(to: directory.appendingPathComponent("body.json"))

        let form = try json(try run(["--form", "\(base)/post", "a=1", "b=x y"]))
        XCTAssertEqual(form["form"] as? [String: String], ["a": "1", "b": "x y"])

        let multipart = try json(try run(["-f", "POST", "\(base)/post", "title=T", "doc@note.txt"]))
        XCTAssertEqual(multipart["form"] as? [String: String], ["title": "T"])
        XCTAssertEqual(multipart["files"] as? [String: String], ["doc": "hello file"])

        let whole = try json(try run(["PUT", "\(base)/put", "@body.json"]))
        XCTAssertEqual(whole["json"] as? [String: Bool], ["whole": true])
    }

    func testBodyFromStandardInput() throws {
        let result = try CurlewProcess.run(["PUT", "\(base)/put", "@-"], in: directory, input: Data("{\"piped\": [1, 2]}".utf8))
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try json(result)["json"] as? NSDictionary, ["piped": [1, 2]] as NSDictionary)
    }

    func testBadArgumentsAreUsageErrors() throws {
        let result = try run(["\(base)/get", "not-an-item"])
        XCTAssertEqual(result.status, 64)
        XCTAssertTrue(result.stderr.hasPrefix("curlew: error: 'not-an-item' is not a request item"), result.stderr)
        XCTAssertEqual(result.stderr.filter { $0 == "\n" }.count, 1, "one line: \(result.stderr)")
        XCTAssertEqual(try run([]).status, 64)
    }

    // MARK: Output

    func testHeadersShowTheStatusLineAsSent() throws {
        let result = try run(["--headers", "\(base)/status/418"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = result.text.components(separatedBy: "\n")
        XCTAssertEqual(lines.first, "HTTP/1.1 418 I'M A TEAPOT")
        XCTAssertTrue(lines.contains("x-more-info: http://tools.ietf.org/html/rfc2324"), result.text)
        XCTAssertFalse(result.text.contains("teapot\n    "), "no body with --headers")
    }

    func testPrintLettersAndVerbose() throws {
        let head = try run(["-p", "Hh", "\(base)/get", "X-A:1"])
        XCTAssertTrue(head.text.hasPrefix("GET /get HTTP/1.1\n"), head.text)
        XCTAssertTrue(head.text.contains("\nX-A: 1\n"), head.text)
        XCTAssertTrue(head.text.contains("\nHTTP/1.1 200 OK\n"), head.text)
        XCTAssertFalse(head.text.contains("\"url\""), "no response body")

        let verbose = try run(["-v", "\(base)/post", "a=1"])
        XCTAssertEqual(verbose.status, 0, verbose.stderr)
        XCTAssertTrue(verbose.text.hasPrefix("POST /post HTTP/1.1\n"), verbose.text)
        XCTAssertTrue(verbose.text.contains("\n{\"a\":\"1\"}\n"), "the request body: \(verbose.text)")
        XCTAssertTrue(verbose.text.contains("\nHTTP/1.1 200 OK\n"))
        XCTAssertTrue(verbose.text.contains("\nElapsed: "), verbose.text)
        XCTAssertTrue(verbose.text.contains("\nConnection: HTTP/1.1 to 127.0.0.1:"), verbose.text)
    }

    func testBinaryBodyIsWrittenByteForByteToAPipe() throws {
        let direct = try run(["\(base)/range/1000"])
        XCTAssertEqual(direct.stdout, Data((0..<1000).map { UInt8(ascii: "a") + UInt8($0 % 26) }))
        let png = try run(["\(base)/image/png"])
        XCTAssertEqual(png.status, 0)
        XCTAssertEqual(Array(png.stdout.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        let saved = try run(["-o", "image.png", "\(base)/image/png"])
        XCTAssertEqual(saved.stdout, Data(), "-o takes the body off stdout")
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("image.png")), png.stdout)
    }

    func testStreamedBodyFollowsTheHeadByteForByte() throws {
        let size = 102_400
        let result = try run(["-p", "hb", "\(base)/range/\(size)?chunk_size=4096"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let separator = Data("\n\n".utf8)
        let split = try XCTUnwrap(result.stdout.range(of: separator))
        XCTAssertTrue(String(decoding: result.stdout[..<split.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\n"))
        XCTAssertEqual(result.stdout[split.upperBound...], Data((0..<size).map { UInt8(ascii: "a") + UInt8($0 % 26) }))

        let file = try run(["-o", "range.bin", "\(base)/range/\(size)"])
        XCTAssertEqual(file.stdout, Data())
        XCTAssertEqual(try Data(contentsOf: directory.appendingPathComponent("range.bin")).count, size)
    }

    /// `-o FILE` empties the file only when an answer's body begins: a request that gets no
    /// answer leaves the user's file as it was (as `curl -o` does); an unwritable FILE is
    /// reported before anything is sent; an empty answer still replaces it.
    func testOutputFileIsKeptWhenNoAnswerArrives() throws {
        let kept = directory.appendingPathComponent("kept.txt")
        try Data("the only copy".utf8).write(to: kept)
        let refused = try run(["-o", "kept.txt", "http://127.0.0.1:9/"])
        XCTAssertEqual(refused.status, 8, refused.stderr)
        XCTAssertEqual(try Data(contentsOf: kept), Data("the only copy".utf8), "nothing arrived, nothing replaced")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("new.txt").path))
        _ = try run(["-o", "new.txt", "http://127.0.0.1:9/"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("new.txt").path), "no file for no answer")

        let unwritable = try run(["-o", "no-such-directory/file.txt", "\(base)/get"])
        XCTAssertEqual(unwritable.status, 1)
        XCTAssertTrue(unwritable.stderr.contains("cannot write no-such-directory/file.txt: No such file or directory"), unwritable.stderr)

        let empty = try run(["-o", "kept.txt", "\(base)/bytes/0"])
        XCTAssertEqual(empty.status, 0, empty.stderr)
        XCTAssertEqual(try Data(contentsOf: kept), Data(), "an empty answer replaces the file")
        let longer = try run(["-o", "kept.txt", "\(base)/range/30"])
        XCTAssertEqual(longer.status, 0, longer.stderr)
        let shorter = try run(["-o", "kept.txt", "\(base)/range/10"])
        XCTAssertEqual(shorter.status, 0, shorter.stderr)
        XCTAssertEqual(String(decoding: try Data(contentsOf: kept), as: UTF8.self), "abcdefghij", "a shorter answer leaves no tail")
    }

    /// `--check-status -o FILE`: an answer whose status fails the run (418's body is a teapot)
    /// leaves the file as it was, as `curl -f -o` does; the error page replaced it.
    func testACheckedFailingStatusLeavesTheOutputFile() throws {
        let kept = directory.appendingPathComponent("kept.txt")
        try Data("the only copy".utf8).write(to: kept)
        let failed = try run(["--check-status", "-o", "kept.txt", "\(base)/status/418"])
        XCTAssertEqual(failed.status, 4, failed.stderr)
        XCTAssertEqual(try Data(contentsOf: kept), Data("the only copy".utf8), "the error page replaced the file")
        XCTAssertTrue(failed.stderr.contains("kept.txt left as it was"), failed.stderr)
        _ = try run(["--check-status", "-o", "new.txt", "\(base)/status/418"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("new.txt").path))
        // Without --check-status a 418 is an answer like any other: its body is saved.
        let unchecked = try run(["-o", "kept.txt", "\(base)/status/418"])
        XCTAssertEqual(unchecked.status, 0, unchecked.stderr)
        XCTAssertTrue(String(decoding: try Data(contentsOf: kept), as: UTF8.self).contains("teapot"))
    }

    /// What a server sends never reaches stderr as control characters: a reason phrase with
    /// a C1 control (U+009B, an 8-bit CSI) in the error of a download and in the warning of
    /// `--check-status`.
    func testAReasonPhraseWithControlCharactersIsCleanedInErrorLines() throws {
        let server = try TestServer()
        defer { server.shutdown() }
        server.route("/hostile") { _ in
            var response = TestResponse.text("no", status: 404)
            response.reason = "Not \u{9B}2J\u{1B}]0;pwned\u{07}Found"
            return response
        }
        let url = server.baseURLString + "/hostile"
        let download = try run(["-d", url])
        XCTAssertEqual(download.status, 4, download.stderr)
        let warned = try run(["--check-status", url])
        XCTAssertEqual(warned.status, 4, warned.stderr)
        for stderr in [download.stderr, warned.stderr] {
            XCTAssertFalse(stderr.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || (0x7F...0x9F).contains($0.value) }, stderr.debugDescription)
            // (The head parser already turns C0 controls into spaces.)
            XCTAssertTrue(stderr.contains("HTTP 404 Not ?2J ]0;pwned Found"), stderr.debugDescription)
        }
    }

    func testPrettyFormatAppliesToAPipeWhenAsked() throws {
        let result = try run(["--pretty=format", "\(base)/get", "a==1"])
        XCTAssertTrue(result.text.hasPrefix("{\n    \"args\": {\n        \"a\": \"1\"\n    },\n"), result.text)
        XCTAssertFalse(result.text.contains("\u{1B}"))
    }

    // MARK: Exit codes

    func testCheckStatus() throws {
        let plain = try run(["\(base)/status/404"])
        XCTAssertEqual(plain.status, 0, "without --check-status a 404 is an answer like any other")
        let notFound = try run(["--check-status", "\(base)/status/404"])
        XCTAssertEqual(notFound.status, 4)
        XCTAssertEqual(notFound.stderr, "curlew: warning: HTTP 404 NOT FOUND\n")
        XCTAssertEqual(try run(["--check-status", "\(base)/status/503"]).status, 5)
        XCTAssertEqual(try run(["--check-status", "\(base)/redirect/1"]).status, 3)
        XCTAssertEqual(try run(["--check-status", "--follow", "\(base)/redirect/1"]).status, 0)
    }

    func testTransportFailuresHaveTheirOwnCodesAndOneLine() throws {
        let redirects = try run(["--follow", "--max-redirects", "2", "\(base)/redirect/5"])
        XCTAssertEqual(redirects.status, 6)
        let refused = try run(["http://127.0.0.1:9/"])
        XCTAssertEqual(refused.status, 8, refused.stderr)
        let timeout = try run(["--timeout", "1", "\(base)/delay/10"])
        XCTAssertEqual(timeout.status, 2, timeout.stderr)
        let dns = try run(["http://curlew-test.invalid/"])
        XCTAssertEqual(dns.status, 7, dns.stderr)
        for failure in [redirects, refused, timeout, dns] {
            XCTAssertTrue(failure.stderr.hasPrefix("curlew: error: "), failure.stderr)
            XCTAssertEqual(failure.stderr.filter { $0 == "\n" }.count, 1, "one line: \(failure.stderr)")
            XCTAssertEqual(failure.stdout, Data())
        }
    }

    // MARK: Sessions, --curl, back-compat, help

    func testSessionKeepsCookiesAndHeadersInPrivateFiles() throws {
        let config = directory.appendingPathComponent("config")
        let environment = ["XDG_CONFIG_HOME": config.path]
        let first = try run(["--session", "s1", "\(base)/cookies/set?flavour=oat", "X-Kept:yes"], environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr)
        let second = try run(["--session", "s1", "\(base)/anything"], environment: environment)
        let echoed = try json(second)
        XCTAssertEqual((echoed["headers"] as? [String: String])?["Cookie"], "flavour=oat")
        XCTAssertEqual((echoed["headers"] as? [String: String])?["X-Kept"], "yes")
        let sessions = config.appendingPathComponent("curlew/sessions")
        for (path, mode) in [(sessions.path, 0o700), (sessions.appendingPathComponent("s1.cookies").path, 0o600),
                             (sessions.appendingPathComponent("s1.headers.json").path, 0o600)] {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, mode, path)
        }
        // Headers are the origin's they were given for: another host (the same server by
        // another name) gets neither the kept header nor a token given with it.
        let token = try run(["--session", "s1", "\(base)/anything", "Authorization:Bearer s1-token"], environment: environment)
        XCTAssertEqual(token.status, 0, token.stderr)
        var components = try XCTUnwrap(URLComponents(string: base))
        components.host = components.host == "127.0.0.1" ? "localhost" : "127.0.0.1"
        let otherHost = try XCTUnwrap(components.string)
        let elsewhere = try json(try run(["--session", "s1", "\(otherHost)/anything"], environment: environment))
        XCTAssertNil((elsewhere["headers"] as? [String: String])?["Authorization"], "the session's token went to another host")
        XCTAssertNil((elsewhere["headers"] as? [String: String])?["X-Kept"])
        let back = try json(try run(["--session", "s1", "\(base)/anything"], environment: environment))
        XCTAssertEqual((back["headers"] as? [String: String])?["Authorization"], "Bearer s1-token")
        XCTAssertEqual((back["headers"] as? [String: String])?["X-Kept"], "yes")
        let other = try run(["--session", "s2", "\(base)/anything"], environment: environment)
        XCTAssertNil((try json(other)["headers"] as? [String: String])?["Cookie"], "sessions do not share cookies")
        let refused = try run(["--session", ".hidden", "\(base)/get"], environment: environment)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.hasPrefix("curlew: error: --session: '.hidden' is not a session name"), refused.stderr)
    }

    /// A session header given again in other letter case replaces the stored one (both were
    /// kept, and the older value was sent at the next run: `x-api-key` sorts after `X-Api-Key`).
    func testASessionHeaderGivenInAnotherCaseReplacesTheStoredOne() throws {
        let environment = ["XDG_CONFIG_HOME": directory.appendingPathComponent("config").path]
        XCTAssertEqual(try run(["--session", "keys", "\(base)/anything", "x-api-key:OLD"], environment: environment).status, 0)
        XCTAssertEqual(try run(["--session", "keys", "\(base)/anything", "X-Api-Key:NEW"], environment: environment).status, 0)
        let later = try json(try run(["--session", "keys", "\(base)/anything"], environment: environment))
        XCTAssertEqual((later["headers"] as? [String: String])?["X-Api-Key"], "NEW")
    }

    /// `--follow` takes a session's headers no further than their origin: a redirect to another
    /// host gets none of them, a redirect within the origin keeps them, and a header typed on
    /// the command line follows the chain as curl's `-H` does.
    func testSessionHeadersStayAtTheirOriginAcrossRedirects() throws {
        let environment = ["XDG_CONFIG_HOME": directory.appendingPathComponent("config").path]
        let given = try run(["--session", "s1", "\(base)/anything", "X-Api-Key:kept-secret"], environment: environment)
        XCTAssertEqual(given.status, 0, given.stderr)
        var components = try XCTUnwrap(URLComponents(string: base))
        components.host = components.host == "127.0.0.1" ? "localhost" : "127.0.0.1"
        let otherHost = try XCTUnwrap(components.string)
        func headers(following target: String, _ extra: [String] = []) throws -> [String: String] {
            let escaped = try XCTUnwrap(target.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let result = try run(
                ["--session", "s1", "--follow", "\(base)/redirect-to?url=\(escaped)"] + extra, environment: environment)
            XCTAssertEqual(result.status, 0, result.stderr)
            return try XCTUnwrap(try json(result)["headers"] as? [String: String], result.text)
        }
        let elsewhere = try headers(following: "\(otherHost)/anything")
        XCTAssertNil(elsewhere["X-Api-Key"], "the session's header followed a redirect to another host")
        XCTAssertEqual(try headers(following: "\(base)/anything")["X-Api-Key"], "kept-secret")
        XCTAssertEqual(try headers(following: "\(otherHost)/anything", ["X-Trace:typed"])["X-Trace"], "typed")
    }

    /// A run that fails still saves the cookies its servers set: the one a redirect hop set
    /// before `--max-redirects 0` stopped the run (exit 6) is sent by the next run, in both
    /// the request and the download mode (a failed run used to save nothing). Headers typed
    /// for a failed run are not kept; with `--check-status` the exchange succeeded, and they are.
    func testASessionKeepsTheCookiesOfARunThatFails() throws {
        let environment = ["XDG_CONFIG_HOME": directory.appendingPathComponent("config").path]
        for (session, mode) in [("plain", [String]()), ("download", ["-d"])] {
            let failed = try run(
                ["--session", session, "--follow", "--max-redirects", "0"] + mode
                    + ["\(base)/cookies/set?flavour=\(session)", "X-Typed:failed"],
                environment: environment)
            XCTAssertEqual(failed.status, 6, failed.stderr)
            let later = try json(try run(["--session", session, "\(base)/anything"], environment: environment))
            XCTAssertEqual((later["headers"] as? [String: String])?["Cookie"], "flavour=\(session)", session)
            XCTAssertNil((later["headers"] as? [String: String])?["X-Typed"], session)
        }
        let checked = try run(["--session", "checked", "--check-status", "\(base)/status/404", "X-Typed:kept"], environment: environment)
        XCTAssertEqual(checked.status, 4, checked.stderr)
        let after = try json(try run(["--session", "checked", "\(base)/anything"], environment: environment))
        XCTAssertEqual((after["headers"] as? [String: String])?["X-Typed"], "kept")
    }

    /// `-o -` is standard output, as in curl (a file named `-` was written and stdout left
    /// empty): the body as it is, also when `--print` leaves the body out; with `--download`,
    /// which saves to a file, it is refused.
    func testOutputDashIsStandardOutput() throws {
        let result = try run(["-o", "-", "\(base)/range/100"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout.count, 100)
        // Standard output is the body's alone: the head and -v's request and timings go to
        // standard error (they came before and after the body on stdout, into the pipe).
        let withHead = try run(["-p", "h", "-o", "-", "\(base)/range/10"])
        XCTAssertEqual(withHead.status, 0, withHead.stderr)
        XCTAssertEqual(withHead.text, "abcdefghij")
        XCTAssertTrue(withHead.stderr.hasPrefix("HTTP/1.1 200"), withHead.stderr)
        let verbose = try run(["-v", "-o", "-", "\(base)/range/10"])
        XCTAssertEqual(verbose.status, 0, verbose.stderr)
        XCTAssertEqual(verbose.text, "abcdefghij")
        XCTAssertTrue(verbose.stderr.hasPrefix("GET /range/10 HTTP/1.1"), verbose.stderr)
        XCTAssertTrue(verbose.stderr.contains("HTTP/1.1 200"), verbose.stderr)
        XCTAssertTrue(verbose.stderr.contains("Elapsed: "), verbose.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("-").path))
        let download = try run(["-d", "-o", "-", "\(base)/range/100"])
        XCTAssertEqual(download.status, 64, download.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("-").path))
    }

    func testCurlPrintsTheCommandInsteadOfSending() throws {
        let result = try run(["--curl", "\(base)/post", "a=1", "Authorization:Bearer secret"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.text.hasPrefix("curl "), result.text)
        XCTAssertTrue(result.text.contains("\(base)/post"), result.text)
        XCTAssertTrue(result.text.contains("--data-binary '{\"a\":\"1\"}'"), result.text)
        XCTAssertFalse(result.text.contains("secret"), "secrets are masked")
    }

    func testTheFirstVersionsGetStillWorks() throws {
        let result = try run(["get", "\(base)/get?hello=curlew", "-H", "X-Demo: 1", "--metrics"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.text.hasPrefix("HTTP/1.1 200 OK\n"), result.text)
        XCTAssertTrue(result.text.contains("\"X-Demo\": \"1\""), result.text)
        XCTAssertTrue(result.stderr.contains("Elapsed: "), result.stderr)
    }

    /// The method may be written in any case: `get` with a request item is `GET`, not the first
    /// version's verb (which refused the item, exit 64, and printed the head to a pipe).
    func testALowercaseGetWithAnItemIsTheMethod() throws {
        let result = try run(["get", "\(base)/get", "a==1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let args = try XCTUnwrap(try json(result)["args"] as? [String: Any], result.text)
        XCTAssertEqual(args["a"] as? String, "1")
    }

    func testHelpDocumentsExitCodes() throws {
        let help = try run(["--help"])
        XCTAssertEqual(help.status, 0)
        for line in ["Exit codes:", "7   the host name could not be resolved", "8   the connection could not be made",
                     "9   TLS failed", "pin", "reach", "image"] {
            XCTAssertTrue(help.text.contains(line), "\(line) missing from:\n\(help.text)")
        }
        XCTAssertEqual(try run(["--version"]).text, "0.1.0\n")
        let requestHelp = try run(["help", "request"])
        XCTAssertTrue(requestHelp.text.contains("--check-status"), requestHelp.text)
        XCTAssertTrue(requestHelp.text.contains("Exit codes:"), requestHelp.text)
    }

    func testImageAndReach() throws {
        let image = try run(["image", "\(base)/image/png"])
        XCTAssertEqual(image.status, 0, image.stderr)
        XCTAssertTrue(image.text.hasPrefix("Format: PNG\nSize:   100 × 100 pixels\nFrames: 1\n"), image.text)
        XCTAssertFalse(image.text.contains("▀"), "no preview off a terminal")
        let preview = try run(["image", "--preview", "--width", "8", "\(base)/image/png"])
        XCTAssertEqual(preview.text.components(separatedBy: "▀").count - 1, 8 * 4, preview.text)
        // The body is read into memory to decode: bounded (it was not, until 2026-11-28).
        let tooLarge = try run(["image", "--max-size", "1000", "\(base)/image/png"])
        XCTAssertEqual(tooLarge.status, 1, tooLarge.stderr)
        XCTAssertTrue(tooLarge.stderr.contains("larger than 1000 bytes (--max-size)"), tooLarge.stderr)
        XCTAssertEqual(try run(["image", "--max-size", "0", "\(base)/image/png"]).status, 64)
        let teapot = try run(["image", "--max-size", "10", "\(base)/status/418"])
        XCTAssertEqual(teapot.status, 4, "an error page too large is its status: \(teapot.stderr)")
        XCTAssertTrue(teapot.stderr.contains("HTTP 418"), teapot.stderr)

        let reach = try run(["reach", "--once", "--timeout", "5"])
        XCTAssertTrue([0, 1].contains(reach.status), reach.stderr)
        XCTAssertTrue(reach.text.contains(" default route: "), reach.text)
        // Edge values of --timeout: refused (inf, nan, negative: they trapped converting to a
        // Duration) or waited for as long as a Duration holds (1e30).
        for value in ["inf", "nan", "-1"] {
            let refused = try run(["reach", "--once", "--timeout=\(value)"])
            XCTAssertEqual(refused.status, 64, "\(value): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("--timeout takes a number of seconds"), refused.stderr)
        }
        let huge = try run(["reach", "--once", "--timeout", "1e30"])
        XCTAssertTrue([0, 1].contains(huge.status), huge.stderr)
    }
}
