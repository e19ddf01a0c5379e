import Foundation
import Security
import Serialization
import SessionCore
import XCTest
@testable import CurlewCLI

/// What the tool prints, without a network: heads, bodies, JSON, names, progress, pins.
final class FormattingTests: XCTestCase {
    private let url = URL(fileURLWithPath: "/")

    func testStatusLineIsTheServersOwn() {
        let head = HTTPResponseHead(
            url: url, statusCode: 200, reasonPhrase: "Ok Then", fields: [("content-TYPE", "text/plain"), ("X-A", "1"), ("x-a", "2")])
        let text = ExchangePrinter(pretty: .none, isTerminal: false).responseHead(head)
        XCTAssertEqual(text, "HTTP/1.1 200 Ok Then\ncontent-TYPE: text/plain\nX-A: 1\nx-a: 2\n")
        let h2 = HTTPResponseHead(url: url, statusCode: 204, httpVersion: "HTTP/2", fields: [])
        XCTAssertEqual(ExchangePrinter(pretty: .none, isTerminal: false).responseHead(h2), "HTTP/2 204\n")
    }

    func testColoursOnlyWhenAsked() {
        let head = HTTPResponseHead(url: url, statusCode: 404, reasonPhrase: "Not Found", fields: [])
        XCTAssertTrue(ExchangePrinter(pretty: .all, isTerminal: true).responseHead(head).contains("\u{1B}[1;31m404 Not Found"))
        XCTAssertFalse(ExchangePrinter(pretty: .format, isTerminal: true).responseHead(head).contains("\u{1B}"))
    }

    func testControlCharactersNeverReachATerminal() {
        let head = HTTPResponseHead(url: url, statusCode: 200, reasonPhrase: "OK", fields: [("X", "a\u{1B}]0;pwned\u{07}b")])
        let text = ExchangePrinter(pretty: .none, isTerminal: true).responseHead(head)
        XCTAssertFalse(text.contains("\u{1B}"))
        XCTAssertTrue(text.contains("X: a?]0;pwned?b"))
        let body = ExchangePrinter(pretty: .none, isTerminal: true).responseBody(Data("hi\u{1B}[2J".utf8), head: nil)
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "hi?[2J\n")
    }

    /// JSON strings may carry DEL and the C1 controls unescaped (U+009B is an 8-bit CSI to
    /// some terminals): formatted for a terminal, they are shown as `?` like any control
    /// character the server sent; the colours' own escapes stay.
    func testFormattedJSONCarriesNoControlCharacterToATerminal() {
        let json = Data("{\"a\u{7F}\": \"x\u{9B}2J\u{85}y\"}\r\n".utf8)
        for pretty in [Pretty.all, .format, .colors] {
            let text = String(decoding: ExchangePrinter(pretty: pretty, isTerminal: true).responseBody(json, head: nil), as: UTF8.self)
            XCTAssertFalse(text.unicodeScalars.contains { $0.value == 0x7F || (0x80...0x9F).contains($0.value) || $0 == "\r" }, "\(pretty): \(text.debugDescription)")
            XCTAssertTrue(text.contains("\"a?\"") && text.contains("\"x?2J?y\""), "\(pretty): \(text.debugDescription)")
        }
        let colored = String(decoding: ExchangePrinter(pretty: .all, isTerminal: true).responseBody(json, head: nil), as: UTF8.self)
        XCTAssertTrue(colored.contains("\u{1B}[1;34m"), "keys keep their colour")
        let piped = ExchangePrinter(pretty: .format, isTerminal: false).responseBody(json, head: nil)
        XCTAssertTrue(piped.contains(0xC2) && piped.contains(0x7F), "a pipe is not a terminal: the text stays as sent")
    }

    func testBodyIsUntouchedOffATerminal() {
        let bytes = Data([0x89, 0x50, 0x4E, 0x47, 0x00, 0xFF, 0x1B])
        XCTAssertEqual(ExchangePrinter(pretty: .none, isTerminal: false).responseBody(bytes, head: nil), bytes)
        let json = Data("{\"a\":1}".utf8)
        XCTAssertEqual(ExchangePrinter(pretty: .none, isTerminal: false).responseBody(json, head: nil), json)
    }

    func testBinaryBodyBecomesANoticeOnATerminal() {
        let head = HTTPResponseHead(url: url, statusCode: 200, fields: [("Content-Type", "image/png")])
        let text = String(decoding: ExchangePrinter(pretty: .all, isTerminal: true).responseBody(Data([0x89, 0x50, 0x00, 0x01]), head: head), as: UTF8.self)
        XCTAssertEqual(text, "[binary body: 4 bytes of image/png not shown on a terminal; save it with -d, -o FILE or > FILE]\n")
        XCTAssertTrue(ExchangePrinter.isBinary(Data([0xC3])), "invalid UTF-8")
        XCTAssertFalse(ExchangePrinter.isBinary(Data("é".utf8)))
    }

    func testJSONIsIndentedInTheServersOrderWithNumbersAsSpelled() throws {
        let formatter = JSONFormatter(style: ANSIStyle(enabled: false))
        let text = try XCTUnwrap(formatter.format(Data(#"{"z":1.0,"a":[true,null,{}],"s":"x\"y","e":[],"big":12345678901234567890}"#.utf8)))
        XCTAssertEqual(text, """
            {
                "z": 1.0,
                "a": [
                    true,
                    null,
                    {}
                ],
                "s": "x\\"y",
                "e": [],
                "big": 12345678901234567890
            }
            """)
        XCTAssertNil(formatter.format(Data("{not json".utf8)))
        // A UTF-8 byte order mark, which JSONSerialization skips: it glued itself to the first
        // key, whose closing brace then closed nothing (a trap).
        XCTAssertEqual(formatter.format(Data([0xEF, 0xBB, 0xBF]) + Data(#"{"a":1}"#.utf8)), "{\n    \"a\": 1\n}")
        XCTAssertEqual(formatter.format(Data("\"only\"".utf8)), "\"only\"")
    }

    func testJSONColours() throws {
        let text = try XCTUnwrap(JSONFormatter(style: ANSIStyle(enabled: true)).format(Data(#"{"k":"v","n":2}"#.utf8)))
        XCTAssertTrue(text.contains("\u{1B}[1;34m\"k\"\u{1B}[0m: \u{1B}[32m\"v\"\u{1B}[0m"))
        XCTAssertTrue(text.contains("\u{1B}[36m2\u{1B}[0m"))
    }

    func testColoursWithoutFormattingKeepTheServersLayout() throws {
        let text = try XCTUnwrap(JSONFormatter(style: ANSIStyle(enabled: true), reindents: false).format(Data("{\"k\": [1,\n {}]}".utf8)))
        XCTAssertEqual(text, "{\u{1B}[1;34m\"k\"\u{1B}[0m: [\u{1B}[36m1\u{1B}[0m,\n {}]}")
        let printed = ExchangePrinter(pretty: .colors, isTerminal: true).responseBody(Data("{\"k\":1}".utf8), head: nil)
        XCTAssertEqual(String(decoding: printed, as: UTF8.self), "{\u{1B}[1;34m\"k\"\u{1B}[0m:\u{1B}[36m1\u{1B}[0m}\n")
    }

    func testPrintSelection() throws {
        XCTAssertEqual(try PrintSelection.resolve(print: nil, headers: false, body: false, verbose: false, stdoutIsTerminal: true),
                       PrintSelection(letters: "hb"))
        XCTAssertEqual(try PrintSelection.resolve(print: nil, headers: false, body: false, verbose: false, stdoutIsTerminal: false),
                       PrintSelection(letters: "b"))
        var verbose = try XCTUnwrap(PrintSelection(letters: "HBhb"))
        verbose.metrics = true
        XCTAssertEqual(try PrintSelection.resolve(print: nil, headers: false, body: false, verbose: true, stdoutIsTerminal: false), verbose)
        XCTAssertEqual(try PrintSelection.resolve(print: nil, headers: true, body: false, verbose: false, stdoutIsTerminal: false),
                       PrintSelection(letters: "h"))
        XCTAssertEqual(try PrintSelection.resolve(print: "Hh", headers: true, body: true, verbose: false, stdoutIsTerminal: true),
                       PrintSelection(letters: "Hh"))
        XCTAssertNil(PrintSelection(letters: "hx"))
        XCTAssertEqual(Pretty.resolve(nil, stdoutIsTerminal: true, environment: [:]), .all)
        XCTAssertEqual(Pretty.resolve(nil, stdoutIsTerminal: false), .none)
        XCTAssertEqual(Pretty.resolve(nil, stdoutIsTerminal: true, environment: ["NO_COLOR": "1"]), .format)
        XCTAssertEqual(Pretty.resolve(nil, stdoutIsTerminal: true, environment: ["NO_COLOR": ""]), .all, "an empty NO_COLOR does not count")
        XCTAssertEqual(Pretty.resolve(.colors, stdoutIsTerminal: false, environment: ["NO_COLOR": "1"]), .colors, "a flag wins")
    }

    func testDownloadNamesStayInTheDirectory() {
        let url = URL(string: "http://example.com/files/report.pdf?x=1")!
        XCTAssertEqual(DownloadNaming.fileName(contentDisposition: nil, url: url, mimeType: nil), "report.pdf")
        XCTAssertEqual(DownloadNaming.fileName(contentDisposition: "attachment; filename=\"../../etc/passwd\"", url: url, mimeType: nil), "passwd")
        XCTAssertEqual(DownloadNaming.fileName(contentDisposition: "attachment; filename=\".bashrc\"", url: url, mimeType: nil), "bashrc")
        XCTAssertEqual(DownloadNaming.fileName(contentDisposition: "attachment; filename=\"a\\\\b.txt\"", url: url, mimeType: nil), "b.txt")
        XCTAssertEqual(
            DownloadNaming.fileName(contentDisposition: "attachment; filename=\"x.txt\"; filename*=UTF-8''caf%C3%A9%20menu.txt", url: url, mimeType: nil),
            "café menu.txt")
        // ISO-8859-1 bytes are Latin-1 characters, not UTF-8 (é is %E9 there; it was dropped to
        // the plain name, or mangled, until 2026-11-28); bytes that are not the charset named,
        // or a broken escape, leave the plain name.
        XCTAssertEqual(
            DownloadNaming.fileName(contentDisposition: "attachment; filename=\"x.txt\"; filename*=iso-8859-1'fr'%E9t%E9.txt", url: url, mimeType: nil),
            "été.txt")
        XCTAssertEqual(
            DownloadNaming.fileName(contentDisposition: "attachment; filename=\"x.txt\"; filename*=UTF-8''%E9t%E9.txt", url: url, mimeType: nil),
            "x.txt")
        XCTAssertEqual(
            DownloadNaming.fileName(contentDisposition: "attachment; filename=\"x.txt\"; filename*=UTF-8''bad%G1.txt", url: url, mimeType: nil),
            "x.txt")
        for unusable in ["UTF-8''", "UTF-8''%2E%2E", "iso-8859-1''caf\u{E9}.txt"] {
            XCTAssertEqual(
                DownloadNaming.fileName(contentDisposition: "attachment; filename=\"x.txt\"; filename*=\(unusable)", url: url, mimeType: nil),
                "x.txt", unusable)
        }
        XCTAssertEqual(DownloadNaming.fileName(contentDisposition: "attachment; filename=\"..\"", url: url, mimeType: nil), "report.pdf")
        XCTAssertEqual(DownloadNaming.fileName(contentDisposition: "inline", url: URL(string: "http://h/")!, mimeType: "application/json"), "index.json")
        XCTAssertEqual(DownloadNaming.fileName(contentDisposition: nil, url: URL(string: "http://h/bytes/10")!, mimeType: "application/octet-stream"), "10.bin")
        XCTAssertEqual(DownloadNaming.sanitize("a\u{1B}b\nc"), "abc")
        XCTAssertEqual(DownloadNaming.sanitize("big.bin.curlew-resume"), "big.bin.curlew-resume.txt", "never a resume-data name")
        XCTAssertEqual(DownloadNaming.sanitize("CurlewDownload-1.tmp"), "_CurlewDownload-1.tmp", "never a partial-file name")
    }

    func testUnusedNamesGetSuffixes() {
        let directory = URL(fileURLWithPath: "/d")
        let taken: Set<String> = ["/d/f.txt", "/d/f.txt-1"]
        XCTAssertEqual(DownloadNaming.unusedName("f.txt", in: directory) { taken.contains($0.path) }.path, "/d/f.txt-2")
        XCTAssertEqual(DownloadNaming.unusedName("g", in: directory) { taken.contains($0.path) }.path, "/d/g")
    }

    func testProgressLine() {
        XCTAssertEqual(ProgressBar.line(written: 500_000, expected: 1_000_000, startBytes: 0, elapsed: 1),
                       " 50% [============>           ] 500.0 kB of 1.0 MB  500.0 kB/s  ETA 1s")
        XCTAssertEqual(ProgressBar.line(written: 999, expected: -1, startBytes: 0, elapsed: 0), "999 B  0 B/s")
        // A continued download: the speed is this run's bytes (it counted the 900 MB on disk).
        XCTAssertEqual(ProgressBar.line(written: 900_500_000, expected: 1_000_000_000, startBytes: 900_000_000, elapsed: 1),
                       " 90% [=====================>  ] 900.5 MB of 1.0 GB  500.0 kB/s  ETA 199s")
        XCTAssertEqual(ProgressBar.line(written: 100, expected: -1, startBytes: 5_000, elapsed: 1), "100 B  0 B/s", "restarted from 0")
        // A server's hostile length and a late first byte: a wait beyond an Int64 trapped.
        XCTAssertEqual(ProgressBar.line(written: 1, expected: .max, startBytes: 0, elapsed: 2),
                       "  0% [>                       ] 1 B of 9223372.0 TB  0 B/s  ETA --")
        XCTAssertTrue(ProgressBar.line(written: .max, expected: -1, startBytes: 0, elapsed: 1e-300).hasSuffix("9223372.0 TB/s"))
    }

    func testExitStatuses() {
        XCTAssertEqual(ExitStatus.forStatus(302), .redirection)
        XCTAssertEqual(ExitStatus.forStatus(404), .clientError)
        XCTAssertEqual(ExitStatus.forStatus(503), .serverError)
        XCTAssertNil(ExitStatus.forStatus(204))
        XCTAssertEqual(ExitStatus.forError(SessionError.timedOut("x")), .timeout)
        XCTAssertEqual(ExitStatus.forError(SessionError.dnsFailure("x")), .dnsFailure)
        XCTAssertEqual(ExitStatus.forError(SessionError.cannotConnect("x")), .cannotConnect)
        XCTAssertEqual(ExitStatus.forError(SessionError.tlsHandshakeFailed("x")), .tlsFailure)
        XCTAssertEqual(ExitStatus.forError(SessionError.tooManyRedirects(3)), .tooManyRedirects)
        // A continued download answered 404 or 503 exits as a new download does (it exited 1).
        XCTAssertEqual(ExitStatus.forError(SessionError.resumeFailed(statusCode: 404, resumeData: nil)), .clientError)
        XCTAssertEqual(ExitStatus.forError(SessionError.resumeFailed(statusCode: 503, resumeData: Data())), .serverError)
        XCTAssertEqual(Set(ExitStatus.allCases.map(\.rawValue)).count, ExitStatus.allCases.count, "codes are distinct")
        XCTAssertTrue(ExitStatus.helpText.contains("7   the host name could not be resolved"))
    }

    func testPinFormats() throws {
        let url = try XCTUnwrap(URL(string: "https://example.com"))
        let pins = ["AAAA", "BBBB"]
        // The text form is OkHttp's `sha256/BASE64`, which `PinSet` takes as it is.
        XCTAssertEqual(PinCommand.renderPins(pins, format: .text, host: "example.com", url: url), "sha256/AAAA\nsha256/BBBB\n")
        XCTAssertEqual(PinCommand.renderPins(pins, format: .curl, host: "example.com", url: url), "--pinnedpubkey 'sha256//AAAA;sha256//BBBB'\n")
        XCTAssertEqual(PinCommand.renderPins(pins, format: .okhttp, host: "example.com", url: url),
                       "CertificatePinner.Builder()\n    .add(\"example.com\", \"sha256/AAAA\")\n    .add(\"example.com\", \"sha256/BBBB\")\n    .build()\n")
        XCTAssertEqual(PinCommand.renderPins(pins, format: .curlew, host: "example.com", url: url),
                       "curlew --pin sha256/AAAA --pin sha256/BBBB https://example.com\n")
        // Pasted into a shell, a URL's `&` must not end the command (it did until 2026-11-28).
        let query = try XCTUnwrap(URL(string: "https://example.com:8443/a?b=1&c=2"))
        XCTAssertEqual(PinCommand.renderPins(["AAAA"], format: .curlew, host: "example.com", url: query),
                       "curlew --pin sha256/AAAA 'https://example.com:8443/a?b=1&c=2'\n")
    }

    /// A certificate's subject is the server's text: OpenSSL's RFC 2253 form escapes the C0
    /// controls but passes the C1 ones (an 8-bit CSI, U+009B) as UTF-8, which reached the terminal.
    func testAPinnedServersSubjectCarriesNoControlCharacter() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-c1-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-utf8",
            "-subj", "/CN=a\u{9B}2Jb", "-days", "1", "-keyout", directory.appendingPathComponent("key.pem").path,
            "-out", directory.appendingPathComponent("cert.pem").path,
        ]
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        let certificate = try Certificate(contentsOf: directory.appendingPathComponent("cert.pem"))
        XCTAssertTrue(certificate.subjectName.unicodeScalars.contains("\u{9B}"), "the name carries the CSI: \(certificate.subjectName)")
        let url = try XCTUnwrap(URL(string: "https://example.com"))
        let text = PinCommand.render([certificate], format: .text, host: "example.com", url: url)
        XCTAssertFalse(text.unicodeScalars.contains { (0x80...0x9F).contains($0.value) }, text)
        XCTAssertTrue(text.contains("CN=a?2Jb"), text)
    }
}
