import Foundation
import Glibc
import Synchronization

/// A one-shot loopback HTTP server that writes a large body from one reused buffer, so the
/// server side of a memory test costs no memory. Runs on its own thread; bounded by `bytes`.
final class StreamingServer: Sendable {
    let port: UInt16
    private let listener: LoopbackListener
    private let counter = SentCounter()

    /// Body bytes the server has handed to its socket so far (a closed receive window stops it).
    var bytesSent: Int { counter.value.load(ordering: .acquiring) }

    private final class SentCounter: Sendable { let value = Atomic<Int>(0) }

    /// Serves exactly one request: `200 OK` with `Content-Length: bytes` of a repeating pattern.
    init(bytes: Int) throws {
        listener = try LoopbackListener()
        port = listener.port
        let descriptor = listener.descriptorForServing
        let counter = self.counter
        let thread = Thread {
            let client = accept(descriptor, nil, nil)
            guard client >= 0 else { return }
            defer { Glibc.close(client) }
            var request = [UInt8](repeating: 0, count: 8192)
            _ = recv(client, &request, request.count, 0)  // one small GET fits in one read
            let head = "HTTP/1.1 200 OK\r\nContent-Length: \(bytes)\r\nContent-Type: application/octet-stream\r\n\r\n"
            guard sendAll(client, Array(head.utf8)) else { return }
            let chunk = [UInt8]((0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            var remaining = bytes
            while remaining > 0 {
                let count = min(remaining, chunk.count)
                guard sendAll(client, Array(chunk[0..<count])) else { return }
                counter.value.add(count, ordering: .releasing)
                remaining -= count
            }
        }
        thread.start()
    }
}

/// Resident-set figures of this process from /proc/self/status, in kilobytes.
enum MemoryStatus {
    static func value(_ field: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    /// Resets VmHWM (peak RSS) to the current RSS (Linux ≥ 4.0).
    static func resetPeak() -> Bool {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        return (try? handle.write(contentsOf: Data("5".utf8))) != nil
    }
}
