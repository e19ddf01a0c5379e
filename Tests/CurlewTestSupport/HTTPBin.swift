import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Access to a real httpbin (`httpbin:app` under gunicorn) for integration tests.
///
/// ```swift
/// let base = try HTTPBin.baseURL            // e.g. http://127.0.0.1:41234
/// let url = base.appendingPathComponent("get")
/// ```
///
/// Resolution order:
/// 1. The `CURLEW_HTTPBIN_URL` environment variable (set by `Scripts/test.sh`, which runs httpbin).
/// 2. Otherwise, once per test process, start `<repo>/.build/venv/bin/gunicorn` (or the executable named
///    by `CURLEW_HTTPBIN_GUNICORN`) on a free loopback port and wait up to 20 s until it accepts.
///    A small shell watchdog ends gunicorn within about half a second after the test process exits,
///    even if it crashes, so no server is left behind.
/// 3. Otherwise throw ``HTTPBinError/unavailable(_:)`` explaining to run `Scripts/test.sh`.
///
/// The result (URL or error) is computed once and cached for the process.
public enum HTTPBin {
    /// The base URL of a running httpbin, without a trailing slash.
    ///
    /// - Throws: ``HTTPBinError`` if no httpbin is configured and none could be started.
    public static var baseURL: URL {
        get throws {
            let environment = ProcessInfo.processInfo.environment
            if let configured = environment["CURLEW_HTTPBIN_URL"], !configured.isEmpty {
                let trimmed = configured.hasSuffix("/") ? String(configured.dropLast()) : configured
                guard let url = URL(string: trimmed), url.scheme != nil, url.host != nil else {
                    throw HTTPBinError.unavailable("CURLEW_HTTPBIN_URL is not a valid URL: \(configured)")
                }
                return url
            }
            return try launched.withLock { cached in
                if let cached {
                    return try cached.get()
                }
                let result = Result { try launch(environment: environment) }
                cached = result
                return try result.get()
            }
        }
    }

    /// The gunicorn started by this process, if any: its URL or why it failed.
    private static let launched = Mutex<Result<URL, any Error>?>(nil)

    private static let startTimeout: Duration = .seconds(20)

    private static func launch(environment: [String: String]) throws -> URL {
        let gunicorn: String
        if let override = environment["CURLEW_HTTPBIN_GUNICORN"], !override.isEmpty {
            gunicorn = override
        } else {
            gunicorn = repositoryRoot().appendingPathComponent(".build/venv/bin/gunicorn").path
        }
        guard FileManager.default.isExecutableFile(atPath: gunicorn) else {
            throw HTTPBinError.unavailable(
                "httpbin is not available: CURLEW_HTTPBIN_URL is unset and \(gunicorn) does not exist. "
                    + "Run the tests through Scripts/test.sh (it installs httpbin and gunicorn into "
                    + ".build/venv and starts them), or set CURLEW_HTTPBIN_URL to a running httpbin."
            )
        }
        let port = try freeLoopbackPort()
        let logURL = FileManager.default.temporaryDirectory
            .appendingPathComponent("curlew-httpbin-\(getpid())-\(port).log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let log = try FileHandle(forWritingTo: logURL)

        // The watchdog shell starts gunicorn, then exits (taking gunicorn down) when this process is gone.
        // SIGKILL, not SIGTERM: children spawned through Foundation's Process from a Dispatch thread
        // inherit a signal mask that blocks SIGTERM, so gunicorn would never see it. Its workers
        // notice their master is gone and exit by themselves.
        let script = """
            "$2" --bind "127.0.0.1:$3" --workers 1 --threads 16 --graceful-timeout 1 \
                --log-level warning httpbin:app &
            child=$!
            trap 'kill -KILL "$child" 2>/dev/null; exit 0' TERM INT HUP
            while kill -0 "$1" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 0.5; done
            kill -KILL "$child" 2>/dev/null
            wait "$child"
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script, "curlew-httpbin", String(getpid()), gunicorn, String(port)]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        try process.run()

        let deadline = ContinuousClock.now + startTimeout
        while ContinuousClock.now < deadline {
            if !process.isRunning {
                throw HTTPBinError.failedToStart("gunicorn exited early; see \(logURL.path)")
            }
            if canConnect(port: port) {
                guard let url = URL(string: "http://127.0.0.1:\(port)") else {
                    throw HTTPBinError.failedToStart("invalid URL for port \(port)")
                }
                return url
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        process.terminate()
        throw HTTPBinError.failedToStart("gunicorn did not accept connections within 20 s; see \(logURL.path)")
    }

    /// `<repo>` for this file at `<repo>/Tests/CurlewTestSupport/HTTPBin.swift` (symlinks resolved).
    private static func repositoryRoot(filePath: String = #filePath) -> URL {
        URL(fileURLWithPath: filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent()  // CurlewTestSupport
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // <repo>
    }

    private static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    private static func makeTCPSocket() throws -> Int32 {
        #if canImport(Darwin)
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #else
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard fd >= 0 else {
            throw HTTPBinError.failedToStart("socket() failed: errno \(errno)")
        }
        return fd
    }

    /// Binds a socket to `127.0.0.1:0`, reads the port the kernel chose, and closes it again.
    private static func freeLoopbackPort() throws -> Int {
        let fd = try makeTCPSocket()
        defer { close(fd) }
        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            throw HTTPBinError.failedToStart("bind() failed: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            throw HTTPBinError.failedToStart("getsockname() failed: errno \(errno)")
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether a TCP connection to `127.0.0.1:port` succeeds right now.
    private static func canConnect(port: Int) -> Bool {
        guard let fd = try? makeTCPSocket(), let port16 = UInt16(exactly: port) else { return false }
        defer { close(fd) }
        var address = loopbackAddress(port: port16)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return result == 0
    }
}

/// Why ``HTTPBin/baseURL`` could not provide an httpbin.
public enum HTTPBinError: Error, Sendable, CustomStringConvertible {
    /// No httpbin is configured or installed; the message says what to do.
    case unavailable(String)
    /// gunicorn was found but did not come up; the message points at its log.
    case failedToStart(String)

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .unavailable(let message): return message
        case .failedToStart(let message): return "httpbin failed to start: \(message)"
        }
    }
}
