import Foundation
import Glibc

/// A one-shot loopback HTTP server that writes a large body from one reused buffer, so the
/// server side of a memory test costs no memory. Runs on its own thread; bounded by `bytes`.
final class StreamingServer: Sendable {
    let port: UInt16
    private let listener: LoopbackListener

    /// Serves exactly one request: `200 OK` with `Content-Length: bytes` of a repeating pattern.
    init(bytes: Int) throws {
        listener = try LoopbackListener()
        port = listener.port
        let descriptor = listener.descriptorForServing
        let thread = Thread {
            let client = accept(descriptor, nil, nil)
            guard client >= 0 else { return }
            defer { Glibc.close(client) }
            var request = [UInt8](repeating: 0, count: 8192)
            _ = recv(client, &request, request.count, 0)  // one small GET fits in one read
            let head = "HTTP/1.1 200 OK\r\nContent-Length: \(bytes)\r\nContent-Type: application/octet-stream\r\n\r\n"
            guard StreamingServer.writeAll(client, Array(head.utf8)) else { return }
            let chunk = [UInt8]((0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            var remaining = bytes
            while remaining > 0 {
                let count = min(remaining, chunk.count)
                guard StreamingServer.writeAll(client, Array(chunk[0..<count])) else { return }
                remaining -= count
            }
        }
        thread.start()
    }

    private static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
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
        FileManager.default.createFile(atPath: "/proc/self/clear_refs", contents: Data("5".utf8))
            || (try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)) != nil
    }
}
