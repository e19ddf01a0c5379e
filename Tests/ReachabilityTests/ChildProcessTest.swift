import Foundation
import Glibc
import Synchronization
import XCTest

/// Runs one test method of this test bundle in a child process (the same xctest binary,
/// given the test's "Module.Class/method" name) and reports in the parent what the child's
/// XCTest reported: each failure at its file and line, and the child's other output.
///
/// The namespace tests need a process of their own: a thread that joins a network
/// namespace with setns(2) passes it on to every thread it creates, and the threads a
/// reachability manager creates (its monitor thread, and the libdispatch workers that the
/// monitor's `queue.async` spawns on demand) stay in libdispatch's shared pool afterwards,
/// where they run other tests' work inside a namespace whose loopback is down. A process
/// boundary is the only fence that holds whatever the code under test does with threads.
struct ChildProcessTest {
    /// Set in the child's environment to the identifier of the one test it must run
    /// in-process; any other test (and every test of a parent process) runs a child.
    static let environmentKey = "CURLEW_CHILD_PROCESS_TEST"
    /// A child that hangs is killed after this long: far beyond a normal run (a few
    /// seconds), so only a real hang ends here, even on a loaded 2-core CI machine.
    static let timeout: TimeInterval = 300

    struct LaunchError: Error, CustomStringConvertible {
        var description: String
    }

    /// What the child did.
    struct Outcome {
        var status: Int32
        var timedOut: Bool
        var output: String
    }

    /// "Module.Class/testMethod", the form the xctest binary accepts as its argument.
    let identifier: String
    /// "Class.testMethod", the name XCTest prints in its "Test Case '…'" lines.
    let testName: String

    init(_ testCase: XCTestCase) {
        testName = testCase.name
        let method = testCase.name.split(separator: ".").last.map(String.init) ?? testCase.name
        identifier = "\(String(reflecting: type(of: testCase)))/\(method)"
    }

    /// Whether this process is the child started for this very test.
    var isCurrentProcess: Bool {
        ProcessInfo.processInfo.environment[Self.environmentKey] == identifier
    }

    /// Starts the child and waits (bounded by `timeout`) until it exits.
    func run() throws -> Outcome {
        // /proc/self/exe is the xctest binary however it was started (`swift test`, by hand).
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [identifier]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.environmentKey] = identifier
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw LaunchError(description: "cannot start \(executable) \(identifier): \(error)")
        }
        let watchdog = Watchdog(processID: process.processIdentifier, timeout: Self.timeout)
        // Reading to EOF also drains the pipe, so a chatty child can never block on it.
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let timedOut = watchdog.finish()
        return Outcome(status: process.terminationStatus, timedOut: timedOut,
                       output: String(decoding: data, as: UTF8.self))
    }

    /// Runs the test in a child and records its result on `testCase` (which must be the
    /// test this runner was made for). Lines that are not XCTest's own are printed, so
    /// the tests' measurements still show in the log.
    func runAndReport(in testCase: XCTestCase) {
        let outcome: Outcome
        do {
            outcome = try run()
        } catch {
            return testCase.recordFailure(withDescription: "\(error)", inFile: #filePath, atLine: #line, expected: false)
        }
        var passed = false
        var failures = 0
        for line in outcome.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if let failure = parseFailure(line) {
                failures += 1
                testCase.recordFailure(withDescription: "(child process) \(failure.message)",
                                       inFile: failure.file, atLine: failure.line, expected: true)
            } else if line.hasPrefix("Test Case '\(testName)' passed") {
                passed = true
            } else if !Self.isXCTestFraming(line) && !line.isEmpty {
                print(line)
            }
        }
        if outcome.timedOut {
            testCase.recordFailure(withDescription: "the child process was killed after \(Int(Self.timeout)) s: "
                                   + Self.tail(of: outcome.output), inFile: #filePath, atLine: #line, expected: false)
        } else if !passed && failures == 0 {
            // A crash, a skip, or a name the child did not recognise (it would run 0 tests).
            testCase.recordFailure(withDescription: "the child process (status \(outcome.status)) did not report "
                                   + "'\(testName)' as passed: " + Self.tail(of: outcome.output),
                                   inFile: #filePath, atLine: #line, expected: false)
        } else if passed && outcome.status != 0 {
            testCase.recordFailure(withDescription: "the child process reported a pass but exited with status "
                                   + "\(outcome.status): " + Self.tail(of: outcome.output),
                                   inFile: #filePath, atLine: #line, expected: false)
        }
    }

    // MARK: - Parsing XCTest's output

    /// swift-corelibs-xctest prints a failure as "FILE:LINE: error: Class.method : MESSAGE".
    private func parseFailure(_ line: String) -> (file: String, line: Int, message: String)? {
        guard let marker = line.range(of: ": error: \(testName) : ") else { return nil }
        let location = line[..<marker.lowerBound]
        guard let colon = location.lastIndex(of: ":"), let number = Int(location[location.index(after: colon)...]) else {
            return nil
        }
        return (String(location[..<colon]), number, String(line[marker.upperBound...]))
    }

    private static func isXCTestFraming(_ line: String) -> Bool {
        line.hasPrefix("Test Suite '") || line.hasPrefix("Test Case '")
            || line.trimmingCharacters(in: .whitespaces).hasPrefix("Executed ")
    }

    private static func tail(of output: String) -> String {
        output.isEmpty ? "(no output)" : String(output.suffix(4000))
    }

    /// Kills the child with SIGKILL if it has not finished by the deadline.
    private final class Watchdog: Sendable {
        private let done = DispatchSemaphore(value: 0)
        /// Set by the watchdog thread when it fired; read after `done` was signalled.
        private let fired = Mutex(false)

        init(processID: Int32, timeout: TimeInterval) {
            // A plain thread, not a Dispatch queue: it must run even when the pool is busy.
            // A child that exits at the very deadline could in theory be reaped and its id
            // reused before `finish()`; at 300 s past a run of seconds that is not a concern.
            Thread { [self] in
                guard done.wait(timeout: .now() + timeout) == .timedOut else { return }
                fired.withLock { $0 = true }
                kill(processID, SIGKILL)
            }.start()
        }

        /// Stops the watchdog; returns whether it had to kill the child.
        func finish() -> Bool {
            done.signal()
            return fired.withLock { $0 }
        }
    }
}
