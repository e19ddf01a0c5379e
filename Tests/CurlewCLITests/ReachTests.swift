import Foundation
import Synchronization
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `curlew reach` without `--once` prints the current path, then keeps watching until it is
/// interrupted.
final class ReachTests: XCTestCase {
    func testWatchesUntilInterrupted() throws {
        let process = Process()
        process.executableURL = try CurlewProcess.binary()
        process.arguments = ["reach"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()

        // The first line, read on its own thread; waited for at most 20 s.
        let firstLine = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let handle = output.fileHandleForReading
        DispatchQueue.global().async {
            var collected = Data()
            while !collected.contains(UInt8(ascii: "\n")) {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                collected.append(chunk)
            }
            firstLine.withLock { $0 = String(decoding: collected, as: UTF8.self) }
            done.signal()
        }
        let arrived = done.wait(timeout: .now() + 20) == .success
        // A `reach` that ended after its first line (as --once does) is gone well within a
        // second; slowness can only make this pass, never fail.
        for _ in 0..<20 where process.isRunning { usleep(50_000) }
        XCTAssertTrue(process.isRunning, "it keeps watching after the first line")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        XCTAssertTrue(arrived, "no line within 20 s")
        let line = try XCTUnwrap(firstLine.withLock { $0 })
        XCTAssertTrue(line.contains(" default route: "), line)
        XCTAssertEqual(process.terminationReason, .uncaughtSignal, "Ctrl-C ends it")
    }
}
