import Foundation
import XCTest
import CurlewTestSupport

/// The same commands under a pseudo-terminal (util-linux `script`): head and body,
/// colours, indented JSON, the binary notice and the progress bar.
final class TerminalTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = try CurlewProcess.httpbin()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            throw XCTSkip("util-linux script is not installed")
        }
    }

    /// Runs curlew with stdout and stderr on a terminal; returns what the terminal showed,
    /// line ends as `\n`, and the text without colours.
    private func onTerminal(_ arguments: [String], in directory: URL? = nil) throws -> (raw: String, plain: String, status: Int32) {
        let binary = try CurlewProcess.binary()
        let command = ([binary.path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let run = try CurlewProcess.runExecutable(
            URL(fileURLWithPath: "/usr/bin/script"), ["-qec", command, "/dev/null"], in: directory,
            environment: ["TERM": "xterm-256color", "COLUMNS": "100"])
        let raw = run.text.replacingOccurrences(of: "\r\n", with: "\n")
        let plain = raw.replacingOccurrences(of: "\u{1B}\\[[0-9;]*[A-Za-z]", with: "", options: .regularExpression)
        return (raw, plain, run.status)
    }

    func testHeadAndColouredJSONOnATerminal() throws {
        let shown = try onTerminal(["\(base)/get", "a==1"])
        XCTAssertEqual(shown.status, 0)
        XCTAssertTrue(shown.plain.hasPrefix("HTTP/1.1 200 OK\n"), shown.plain)
        XCTAssertTrue(shown.raw.contains("\u{1B}[1;32m200 OK\u{1B}[0m"), "the status is coloured")
        XCTAssertTrue(shown.plain.contains("\n\n{\n    \"args\": {\n        \"a\": \"1\"\n    },"), shown.plain)
        XCTAssertTrue(shown.raw.contains("\u{1B}[1;34m\"args\"\u{1B}[0m"), "keys are coloured")
    }

    func testPrettyNoneAndBodyOnlyOnATerminal() throws {
        let shown = try onTerminal(["--pretty=none", "--body", "\(base)/get"])
        XCTAssertFalse(shown.raw.contains("\u{1B}["), shown.raw)
        XCTAssertTrue(shown.plain.hasPrefix("{\n  \"args\""), "the server's own layout: \(shown.plain)")
    }

    func testBinaryBodyIsANoticeOnATerminal() throws {
        let shown = try onTerminal(["\(base)/image/png"])
        XCTAssertEqual(shown.status, 0)
        XCTAssertTrue(shown.plain.contains("\n\n[binary body: 8090 bytes of image/png not shown on a terminal; save it with -d, -o FILE or > FILE]\n"), shown.plain)
        XCTAssertFalse(shown.raw.contains("IHDR"), "no PNG bytes reach the terminal")
    }

    /// The first version's `get` verb on a terminal: a body that would set the terminal's
    /// title (ESC ] 0 ; … BEL) reaches it with its control characters shown as `?`. It was
    /// written raw (on a pipe it still is, byte for byte: EndToEndTests).
    func testTheGetVerbKeepsServerControlCharactersOffTheTerminal() throws {
        let shown = try onTerminal(["get", "\(base)/base64/G10wO3B3bgdoZWxsbwo="])
        XCTAssertEqual(shown.status, 0, shown.plain)
        XCTAssertFalse(shown.raw.contains("\u{1B}]"), shown.raw)
        XCTAssertTrue(shown.plain.contains("?]0;pwn?hello"), shown.plain)
    }

    func testDownloadShowsProgressOnATerminal() throws {
        let directory = try CurlewProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let shown = try onTerminal(["-d", "\(base)/range/50000?chunk_size=5000&duration=1"], in: directory)
        XCTAssertEqual(shown.status, 0, shown.plain)
        XCTAssertTrue(shown.plain.contains("100% [========================] 50.0 kB of 50.0 kB"), shown.plain)
        XCTAssertTrue(shown.plain.contains("curlew: saved 50000.bin (50000 bytes)"), shown.plain)
    }

    func testImagePreviewOnATerminal() throws {
        let shown = try onTerminal(["image", "--width", "10", "\(base)/image/png"])
        XCTAssertEqual(shown.status, 0, shown.plain)
        XCTAssertTrue(shown.plain.hasPrefix("Format: PNG\n"), shown.plain)
        XCTAssertTrue(shown.raw.contains("\u{1B}[38;2;"), "true-colour cells")
        XCTAssertEqual(shown.plain.components(separatedBy: "▀").count - 1, 50, "10 columns × 5 rows")
    }
}
