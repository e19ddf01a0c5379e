import Foundation
import Glibc
import Synchronization

/// A loopback TCP server whose every connection runs a script on raw sockets: for faults the
/// HTTP test server cannot play (a proxy that drops the CONNECT, a server that answers before
/// reading an upload and resets, a peer that reads a ClientHello and hangs up).
final class ScriptedServer: Sendable {
    /// The bytes a connection sent, as far as the script read them.
    let received = Mutex<[String]>([])
    /// Connections accepted so far.
    let accepted = Mutex(0)
    let port: UInt16
    private let listener: LoopbackListener

    /// Accepts at most `connections` connections (bounded), each on its own thread.
    init(connections: Int = 64, script: @escaping @Sendable (_ socket: Int32, _ server: ScriptedServer) -> Void) throws {
        listener = try LoopbackListener()
        port = listener.port
        let descriptor = listener.descriptorForServing
        let thread = Thread { [self] in
            for _ in 0..<connections {
                let client = accept(descriptor, nil, nil)
                guard client >= 0 else { return }
                self.accepted.withLock { $0 += 1 }
                let worker = Thread {
                    script(client, self)
                    Glibc.close(client)
                }
                worker.start()
            }
        }
        thread.start()
    }

    var baseURLString: String { "http://127.0.0.1:\(port)" }

    /// Stops accepting (wakes the blocked `accept`).
    func stop() {
        shutdown(listener.descriptorForServing, Int32(SHUT_RDWR))
        listener.close()
    }

    deinit { stop() }

    /// Reads until the end of a request head (`CRLF CRLF`), at most 64 KiB; records and returns
    /// what was read (the head and any body bytes that came with it). Nil on EOF or error.
    @discardableResult
    func readHead(_ socket: Int32) -> String? {
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65536 {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            bytes += buffer[0..<count]
            if bytes.count >= 4, bytes.firstRange(of: [13, 10, 13, 10]) != nil { break }
        }
        let text = String(decoding: bytes, as: UTF8.self)
        received.withLock { $0.append(text) }
        return text
    }

    /// Reads the rest of the body announced by `head`'s `Content-Length` (what `readHead` read
    /// past the head counts); returns that length, or nil when the connection ends first.
    func readBody(_ socket: Int32, after head: String) -> Int? {
        let bytes = Array(head.utf8)
        guard let end = bytes.firstRange(of: [13, 10, 13, 10])?.upperBound else { return nil }
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        var remaining = length - (bytes.count - end)
        var sink = [UInt8](repeating: 0, count: 65536)
        while remaining > 0 {
            let count = recv(socket, &sink, min(sink.count, remaining), 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            remaining -= count
        }
        return length
    }

    /// Reads one chunk of whatever arrives (a TLS ClientHello); false on EOF or error.
    func readSome(_ socket: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16384)
        let count = recv(socket, &buffer, buffer.count, 0)
        guard count > 0 else { return false }
        received.withLock { $0.append("\(count) bytes") }
        return true
    }

    /// Writes `text` whole.
    @discardableResult
    func write(_ socket: Int32, _ text: String) -> Bool { sendAll(socket, Array(text.utf8)) }

    /// Makes the coming `close` send RST instead of FIN (`SO_LINGER` zero), as a server does
    /// that closes with unread bytes in its receive buffer.
    func resetOnClose(_ socket: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    var acceptedCount: Int { accepted.withLock { $0 } }
}
