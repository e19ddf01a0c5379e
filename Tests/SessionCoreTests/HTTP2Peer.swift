import CurlewTestSupport
import Foundation
import Glibc
import Synchronization

/// Debian's `nghttpd` (nghttp2-server) serving a folder over HTTP/2 with TLS on loopback:
/// a real HTTP/2 peer for the tests (the in-process NIO server speaks HTTP/1.1 only).
///
/// One peer per test process (`shared`). A small shell parent stops nghttpd when this
/// process exits, even by a crash (SIGKILL: children spawned through Foundation's Process
/// inherit a mask that blocks SIGTERM); nothing here ever waits on the child (Foundation's
/// `Process.waitUntilExit` can spin on Linux).
final class HTTP2Peer: Sendable {
    let port: UInt16
    /// The folder the peer serves; tests write their files here.
    let directory: URL

    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    private static let instance = Mutex<Result<HTTP2Peer, Unavailable>?>(nil)
    private static let cleartextInstance = Mutex<Result<HTTP2Peer, Unavailable>?>(nil)

    /// A second process-wide peer without TLS (`nghttpd --no-tls`): HTTP/2 with prior
    /// knowledge (h2c), for `SessionConfiguration.HTTPVersion.http2PriorKnowledge`.
    static func sharedCleartext() throws -> HTTP2Peer {
        try cleartextInstance.withLock { cached in
            if let cached { return try cached.get() }
            let result: Result<HTTP2Peer, Unavailable>
            do throws(Unavailable) {
                result = .success(try HTTP2Peer(certificateChain: nil, privateKey: nil))
            } catch {
                result = .failure(error)
            }
            cached = result
            return try result.get()
        }
    }

    /// The process-wide peer, started on first use with the test certificates' leaf.
    static func shared() throws -> HTTP2Peer {
        try instance.withLock { cached in
            if let cached { return try cached.get() }
            let result: Result<HTTP2Peer, Unavailable>
            do {
                let certificates = try TestCertificates.shared()
                result = .success(try HTTP2Peer(certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM))
            } catch let error as Unavailable {
                result = .failure(error)
            } catch {
                result = .failure(Unavailable(description: "\(error)"))
            }
            cached = result
            return try result.get()
        }
    }

    /// Starts `nghttpd` (with TLS when given a chain and key, else `--no-tls`) and waits
    /// (bounded, 10 s) until it accepts connections.
    private init(certificateChain: URL?, privateKey: URL?) throws(Unavailable) {
        let executable = ["/usr/sbin/nghttpd", "/usr/bin/nghttpd"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let executable else {
            throw Unavailable(description: "nghttpd is missing: Scripts/test.sh installs nghttp2-server")
        }
        var tls: [String]?
        if let certificateChain, let privateKey { tls = [privateKey.path, certificateChain.path] }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-h2\(tls == nil ? "c" : "")-\(getpid())")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            port = try LoopbackPort.closed()
        } catch {
            throw Unavailable(description: "cannot prepare nghttpd: \(error)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        var arguments = [executable, "--address=127.0.0.1", "-d", directory.path]
        if let tls { arguments += [String(port)] + tls } else { arguments += ["--no-tls", String(port)] }
        let command = arguments
            .map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        process.arguments = ["-c", "\(command) & child=$!; "
            + "while kill -0 \(getpid()) 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 0.5; done; kill -KILL $child 2>/dev/null"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { throw Unavailable(description: "cannot start nghttpd: \(error)") }
        for _ in 0..<200 {
            if HTTP2Peer.accepts(port: port) { return }
            usleep(50_000)
        }
        throw Unavailable(description: "nghttpd did not start on port \(port)")
    }

    private static func accepts(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
