import Foundation
import Glibc
import Synchronization
import XCTest

/// A named network namespace made for one test (`ip netns add curlew-r-PID-N`), removed
/// again by `destroy()`. Commands run in it with `ip -n NAME …`; code that must open
/// sockets in it runs on a private thread that joins it with setns(2). Every thread that
/// thread starts inherits the namespace and may outlive the call (libdispatch creates a
/// worker on the thread that enqueues work when its pool has none idle, and keeps it for
/// later work), so this is used only inside a test's own child process (`ChildProcessTest`).
final class NetworkNamespace: @unchecked Sendable {  // immutable after init: only `let`s
    let name: String
    private static let counter = Counter()

    /// Thread-safe counter for unique names; NSLock makes the `@unchecked Sendable` true.
    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func next() -> Int {
            lock.lock()
            defer { lock.unlock() }
            value += 1
            return value
        }
    }

    struct CommandError: Error, CustomStringConvertible {
        var description: String
    }

    /// Creates the namespace with loopback down, as a fresh namespace has it.
    init() throws {
        guard geteuid() == 0 else {
            throw CommandError(description: "reachability tests need root to create network namespaces")
        }
        Self.removeStaleNamespaces()
        name = "curlew-r-\(getpid())-\(Self.counter.next())"
        try Self.run(Self.ipPath(), ["netns", "add", name])
    }

    /// Removes the namespace; its interfaces go with it (a veth's peer too).
    func destroy() {
        _ = try? Self.run(Self.ipPath(), ["netns", "del", name])
    }

    /// Runs `ip -n NAME args…`.
    func ip(_ arguments: String...) throws {
        try Self.run(Self.ipPath(), ["-n", name] + arguments)
    }

    /// Runs many `ip` commands in one process (`ip -n NAME -batch FILE`), for storms.
    func batch(_ lines: [String]) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString).batch")
        try lines.joined(separator: "\n").appending("\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        try Self.run(Self.ipPath(), ["-n", name, "-batch", file.path])
    }

    /// Runs `body` on a new thread that has joined this namespace, and returns its result.
    /// Sockets opened there, and threads started there, directly or by libdispatch on its
    /// behalf, belong to this namespace for good.
    func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let descriptor = open("/var/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CommandError(description: "open netns \(name): errno \(errno)") }
        defer { close(descriptor) }
        let box = ResultBox<T>()
        let work = BodyBox(body)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            guard let setns = Self.setnsFunction else {
                box.set(.failure(CommandError(description: "setns(2) not found in libc")))
                return
            }
            // CLONE_NEWNET = 0x40000000: join only the network namespace, only on this thread.
            guard setns(descriptor, 0x4000_0000) == 0 else {
                box.set(.failure(CommandError(description: "setns: errno \(errno)")))
                return
            }
            box.set(work.runAndRelease())
        }
        thread.start()
        guard done.wait(timeout: .now() + 30) == .success, let result = box.get() else {
            throw CommandError(description: "namespace thread did not finish")
        }
        return try result.get()
    }

    // MARK: - Helpers

    /// Hands `body` to the namespace thread exactly once, so the closure and what it
    /// captured are released before `perform` returns rather than whenever Foundation frees
    /// the finished `Thread`: a test that drops its last reference to a manager right after
    /// `perform` expects the manager's deinit to run then.
    private final class BodyBox<T: Sendable>: Sendable {
        private let body: Mutex<(@Sendable () throws -> T)?>

        init(_ body: @escaping @Sendable () throws -> T) {
            self.body = Mutex(body)
        }

        /// Takes the body out, runs it, and lets it go when this returns.
        func runAndRelease() -> Result<T, any Error> {
            let taken = body.withLock { stored in
                defer { stored = nil }
                return stored
            }
            guard let taken else { return .failure(CommandError(description: "the body already ran")) }
            return Result { try taken() }
        }
    }

    private final class ResultBox<T: Sendable>: @unchecked Sendable {  // NSLock guards `value`
        private let lock = NSLock()
        private var value: Result<T, any Error>?
        func set(_ result: Result<T, any Error>) {
            lock.lock()
            value = result
            lock.unlock()
        }
        func get() -> Result<T, any Error>? {
            lock.lock()
            defer { lock.unlock() }
            return value
        }
    }

    /// Glibc's Swift module does not import setns(2); it is looked up in libc instead.
    private static let setnsFunction: (@convention(c) (Int32, Int32) -> Int32)? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "setns") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
    }()

    static func ipPath() throws -> String {
        for path in ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"] where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        throw CommandError(description: "iproute2's `ip` is not installed (apt-get install iproute2)")
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw CommandError(description: "\(executable) \(arguments.joined(separator: " ")) failed: \(text)")
        }
        return text
    }

    /// Deletes namespaces left by earlier test processes that died before their tearDown.
    private static func removeStaleNamespaces() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/var/run/netns") else { return }
        for name in names where name.hasPrefix("curlew-r-") {
            let parts = name.split(separator: "-")
            guard parts.count == 4, let pid = Int32(parts[2]), pid != getpid(), kill(pid, 0) != 0 else { continue }
            _ = try? run((try? ipPath()) ?? "/usr/sbin/ip", ["netns", "del", name])
        }
    }
}
