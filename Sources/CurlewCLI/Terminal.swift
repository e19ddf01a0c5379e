import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Standard output or standard error: whether it is a terminal, and unbuffered writes.
///
/// Written through `write(2)` directly: the body goes out byte for byte, in order with the
/// head, with no buffer to flush when the tool exits with a status code.
struct Terminal: Sendable {
    /// The file descriptor.
    let descriptor: Int32

    static let standardOutput = Terminal(descriptor: STDOUT_FILENO)
    static let standardError = Terminal(descriptor: STDERR_FILENO)

    /// Whether this stream is a terminal.
    var isTerminal: Bool { isatty(descriptor) == 1 }

    /// The terminal's width in columns, nil when unknown.
    var columns: Int? {
        var size = winsize()
        guard ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    /// Writes every byte (retrying short writes and EINTR); the reason when the stream cannot
    /// take them (a closed pipe, a full disk), else nil.
    @discardableResult
    func write(_ data: Data) -> String? {
        data.withUnsafeBytes { buffer -> String? in
            guard let base = buffer.baseAddress else { return nil }
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return String(cString: strerror(errno))
                }
                offset += written
            }
            return nil
        }
    }

    /// Writes the UTF-8 of `text`; the reason when the stream cannot take it, else nil.
    @discardableResult
    func write(_ text: String) -> String? {
        write(Data(text.utf8))
    }
}
