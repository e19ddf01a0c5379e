import Foundation
import XCTest
import CurlewTestSupport

/// Every `curlew` line of the ```sh blocks in Docs/CLI.md runs against the local httpbin
/// (`httpbin.org` in the text is rewritten to it) and exits as the doc says: 0, or the code
/// of a trailing `# exit N` comment. Lines marked `# not run` need the wider internet or
/// wait forever. The test fails if it finds fewer examples than the page is known to hold,
/// so a broken extraction cannot pass by running nothing.
final class DocsExamplesTests: XCTestCase {
    static let minimumExamples = 40

    struct Example {
        var line: Int
        var command: String
        var expectedStatus: Int32
    }

    static func docsURL() -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Docs/CLI.md")
    }

    /// The runnable `curlew` lines of the page's ```sh blocks.
    static func examples(in text: String) -> (run: [Example], skipped: Int) {
        var examples: [Example] = []
        var skipped = 0
        var inShell = false
        for (index, rawLine) in text.components(separatedBy: "\n").enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("```") {
                inShell = !inShell && line == "```sh"
                continue
            }
            guard inShell else { continue }
            var command = line.hasPrefix("$ ") ? String(line.dropFirst(2)) : line
            guard command.hasPrefix("curlew ") || command == "curlew" || command.contains("| curlew ") else { continue }
            if command.contains("# not run") {
                skipped += 1
                continue
            }
            var status: Int32 = 0
            if let range = command.range(of: "# exit ") {
                status = Int32(command[range.upperBound...].trimmingCharacters(in: .whitespaces)) ?? -1
                command = String(command[..<range.lowerBound]).trimmingCharacters(in: .whitespaces)
            }
            examples.append(Example(line: index + 1, command: command, expectedStatus: status))
        }
        return (examples, skipped)
    }

    func testTheExtractionFindsExamples() throws {
        let sample = "text\n```sh\ncurlew a.b/c   # exit 4\n$ curlew x.y\nnot curlew\necho 1 | curlew z.w @-\n```\n```\ncurlew no\n```\n```sh\ncurlew reach  # not run\n```\n"
        let (found, skipped) = Self.examples(in: sample)
        XCTAssertEqual(found.map(\.command), ["curlew a.b/c", "curlew x.y", "echo 1 | curlew z.w @-"])
        XCTAssertEqual(found.map(\.expectedStatus), [4, 0, 0])
        XCTAssertEqual(skipped, 1)
    }

    func testEveryExampleRuns() throws {
        let base = try CurlewProcess.httpbin()
        let binary = try CurlewProcess.binary()
        let text = try String(contentsOf: Self.docsURL(), encoding: .utf8)
        let (examples, _) = Self.examples(in: text)
        XCTAssertGreaterThanOrEqual(examples.count, Self.minimumExamples, "Docs/CLI.md lost its examples, or the extraction broke")

        // The files the examples name, in a fresh working directory.
        let directory = try CurlewProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("{\"name\": \"Curlew\", \"stars\": 5}".utf8).write(to: directory.appendingPathComponent("body.json"))
        try Data("A short note.\n".utf8).write(to: directory.appendingPathComponent("notes.txt"))
        try Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]).write(to: directory.appendingPathComponent("photo.png"))
        try Data("[\"swift\", \"http\"]".utf8).write(to: directory.appendingPathComponent("tags.json"))

        let host = base.replacingOccurrences(of: "http://", with: "")
        let environment = [
            "PATH": binary.deletingLastPathComponent().path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
            "XDG_CONFIG_HOME": directory.appendingPathComponent("config").path,
        ]
        for example in examples {
            let command = example.command
                .replacingOccurrences(of: "https://httpbin.org", with: base)
                .replacingOccurrences(of: "http://httpbin.org", with: base)
                .replacingOccurrences(of: "httpbin.org", with: host)
            let run = try CurlewProcess.runExecutable(URL(fileURLWithPath: "/bin/sh"), ["-c", command], in: directory, environment: environment)
            XCTAssertEqual(run.status, example.expectedStatus, "Docs/CLI.md:\(example.line): \(command)\n\(run.stderr)")
        }
    }
}
