import Foundation
import Synchronization
import XCTest
import CurlewTestSupport

/// Runs the built `curlew` binary, as a user would, and collects what it wrote.
struct CurlewRun {
    var status: Int32
    var stdout: Data
    var stderr: String
    var text: String { String(decoding: stdout, as: UTF8.self) }
}

enum CurlewProcess {
    /// The `curlew` built next to this test bundle (`swift build --build-tests` builds both
    /// into the same bin directory), or `CURLEW_BIN`.
    static func binary() throws -> URL {
        if let override = ProcessInfo.processInfo.environment["CURLEW_BIN"], !override.isEmpty {
            return URL(fileURLWithPath: override)
        }
        var candidates: [URL] = []
        if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("curlew"))
        }
        let argument0 = URL(fileURLWithPath: CommandLine.arguments[0])
        var directory = argument0.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("curlew"))
            directory = directory.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/curlew"))
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) && !$0.hasDirectoryPath }) else {
            throw XCTSkip("no built curlew binary next to the tests (run swift build --build-tests)")
        }
        return found
    }

    /// Runs `curlew arguments` in `directory` with `environment` added, stdin from /dev/null,
    /// and waits for it (bounded by `timeout` seconds, after which it is killed and the test fails).
    static func run(
        _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:], input: Data? = nil,
        timeout: Double = 60, file: StaticString = #filePath, line: UInt = #line
    ) throws -> CurlewRun {
        try runExecutable(
            try binary(), arguments, in: directory, environment: environment, input: input, timeout: timeout, file: file, line: line)
    }

    static func runExecutable(
        _ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:],
        input: Data? = nil, timeout: Double = 60, file: StaticString = #filePath, line: UInt = #line
    ) throws -> CurlewRun {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["NO_COLOR"] = nil
        for (key, value) in environment { env[key] = value }
        process.environment = env
        if let directory { process.currentDirectoryURL = directory }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let inputPipe = input.map { _ in Pipe() }
        process.standardInput = inputPipe ?? FileHandle.nullDevice
        try process.run()
        if let input, let inputPipe {
            try inputPipe.fileHandleForWriting.write(contentsOf: input)
            try inputPipe.fileHandleForWriting.close()
        }
        // Read both pipes to their end on their own threads so a full pipe never blocks the child.
        let collected = DispatchGroup()
        let outData = Mutex(Data())
        let errData = Mutex(Data())
        let outHandle = out.fileHandleForReading
        let errHandle = err.fileHandleForReading
        DispatchQueue.global().async(group: collected) {
            let data = outHandle.readDataToEndOfFile()
            outData.withLock { $0 = data }
        }
        DispatchQueue.global().async(group: collected) {
            let data = errHandle.readDataToEndOfFile()
            errData.withLock { $0 = data }
        }
        if collected.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            XCTFail("curlew \(arguments) did not finish within \(timeout) s", file: file, line: line)
            _ = collected.wait(timeout: .now() + 5)
        }
        process.waitUntilExit()
        return CurlewRun(
            status: process.terminationStatus, stdout: outData.withLock { $0 },
            stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self))
    }

    /// A fresh directory for a test's files.
    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The httpbin base URL, e.g. http://127.0.0.1:18181.
    static func httpbin() throws -> String {
        try HTTPBin.baseURL.absoluteString
    }
}
