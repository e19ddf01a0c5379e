// `timeval`'s fields (in `rusage`) belong to whichever C module the compiler job loaded first:
// Glibc, or CDispatch (libdispatch's headers include <sys/time.h>). Which one depends on how
// the target's files are batched, so both are imported (member import visibility).
import CDispatch
import Foundation
import Glibc
import Synchronization

/// Loopback ports for tests that need "nothing listens here" or "listens, never accepts".
enum LoopbackPort {
    /// A port that was free a moment ago and has nothing listening (connection refused).
    static func closed() throws -> UInt16 {
        let listener = try LoopbackListener()
        let port = listener.port
        listener.close()
        return port
    }
}

/// A raw TCP socket bound to 127.0.0.1 on a random port. `listen()`ed, it completes TCP
/// handshakes in the kernel's backlog, but the test decides whether anything is accepted.
final class LoopbackListener: @unchecked Sendable {
    // @unchecked: `descriptor` is guarded by `lock`.
    private let lock = Mutex<Int32>(-1)
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound, listen(fd, 128) == 0 else {
            Glibc.close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        port = UInt16(bigEndian: address.sin_port)
        lock.withLock { $0 = fd }
    }

    /// Connections completed by the kernel and waiting in the backlog or accepted: counted by
    /// accepting them all now (non-blocking).
    func acceptedConnections() -> Int {
        lock.withLock { fd in
            guard fd >= 0 else { return 0 }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            var count = 0
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { break }
                count += 1
                Glibc.close(client)
            }
            return count
        }
    }

    /// The listening descriptor, for a server thread that accepts on it.
    var descriptorForServing: Int32 { lock.withLock { $0 } }

    func close() {
        lock.withLock { fd in
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }
    }

    deinit { close() }
}

/// Writes every byte to a socket (retrying short writes and EINTR); false on failure.
func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return false }
        offset += written
    }
    return true
}

/// Open file descriptors of this process.
func openFileDescriptorCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
}

/// CPU time (user + system, in clock ticks) a thread of this process has used.
func cpuTicks(ofThread tid: Int32) -> Int? {
    guard let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return nil }
    // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
    return user + system
}

/// Process CPU time in microseconds (getrusage, user + system).
func processCPUMicroseconds() -> Int {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + usage.ru_utime.tv_usec + usage.ru_stime.tv_usec
}
