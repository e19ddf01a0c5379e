import Foundation
import Glibc
import Synchronization

/// A one-connection loopback HTTP/1.1 server on a thread of its own, for the 100 MB tests:
/// it streams a body from one reused buffer, or reads and counts an upload without keeping
/// it, so the server side costs no memory in the process being measured. It also sends an
/// answer byte for byte, for heads a string-based server cannot write.
final class RawLoopbackServer: Sendable {
    enum Mode: Sendable {
        /// Answers with `bytes` bytes of a repeating pattern.
        case serve(bytes: Int)
        /// Reads a `Content-Length` body and answers `{"bytes":N,"checksum":C}` (C: every
        /// 997th byte, folded).
        case count
        /// Answers with these bytes as they are (a head no `String` can carry), then closes.
        case answer([UInt8])
    }

    let port: UInt16
    private let descriptor: Int32

    init(_ mode: Mode) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0, listen(fd, 4) == 0 else {
            Glibc.close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        descriptor = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread { Self.serveOne(fd, mode) }.start()
    }

    deinit { Glibc.close(descriptor) }

    private static func serveOne(_ listener: Int32, _ mode: Mode) {
        let client = accept(listener, nil, nil)
        guard client >= 0 else { return }
        defer { Glibc.close(client) }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        // The request head (and perhaps the start of the body).
        var head: [UInt8] = []
        var bodyStart: [UInt8] = []
        while true {
            let count = recv(client, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            head.append(contentsOf: buffer[0..<count])
            if let end = head.firstRange(of: Array("\r\n\r\n".utf8)) {
                bodyStart = Array(head[end.upperBound...])
                head = Array(head[..<end.lowerBound])
                break
            }
            guard head.count < 64 << 10 else { return }
        }
        switch mode {
        case .serve(let bytes):
            let response = "HTTP/1.1 200 OK\r\nContent-Length: \(bytes)\r\nContent-Type: application/octet-stream\r\n\r\n"
            guard sendAll(client, Array(response.utf8)) else { return }
            let pattern = (0..<buffer.count).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            var remaining = bytes
            while remaining > 0 {
                let count = min(remaining, pattern.count)
                guard sendAll(client, Array(pattern[0..<count])) else { return }
                remaining -= count
            }
        case .answer(let bytes):
            _ = sendAll(client, bytes)
        case .count:
            let text = String(decoding: head, as: UTF8.self).lowercased()
            guard let line = text.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                let expected = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
            else { return }
            var received = 0
            var checksum: UInt64 = 0
            // Every 997th byte (by position in the body) is summed: enough to catch a lost,
            // repeated or reordered piece, and cheap in a debug build.
            func add(_ bytes: ArraySlice<UInt8>) {
                var offset = (997 - received % 997) % 997
                while offset < bytes.count {
                    checksum = checksum &* 31 &+ UInt64(bytes[bytes.startIndex + offset])
                    offset += 997
                }
                received += bytes.count
            }
            add(bodyStart[...])
            while received < expected {
                let count = recv(client, &buffer, min(buffer.count, expected - received), 0)
                guard count > 0 else { return }
                add(buffer[0..<count])
            }
            let json = "{\"bytes\":\(received),\"checksum\":\(Int64(bitPattern: checksum))}"
            let response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\nConnection: close\r\n\r\n\(json)"
            _ = sendAll(client, Array(response.utf8))
        }
    }

    private static func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }
}

/// A figure of this process's memory in KiB (`VmRSS`, or `VmHWM`: the peak since the last
/// ``resetPeakResident()``), read with read(2) from /proc/self/status.
func residentKilobytes(_ field: String = "VmRSS") -> Int {
    let fd = open("/proc/self/status", O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { Glibc.close(fd) }
    var bytes = [UInt8](repeating: 0, count: 16 << 10)
    let count = read(fd, &bytes, bytes.count)
    guard count > 0 else { return 0 }
    let text = String(decoding: bytes[0..<count], as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// Resets `VmHWM` to the current RSS (Linux 4.0 and later); false when it cannot.
func resetPeakResident() -> Bool {
    let fd = open("/proc/self/clear_refs", O_WRONLY)
    guard fd >= 0 else { return false }
    defer { Glibc.close(fd) }
    return write(fd, "5", 1) == 1
}
