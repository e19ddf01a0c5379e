import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writing a whole buffer to a file descriptor: `write(2)` may write less than asked, and a
/// signal may interrupt it. For the files Curlew writes whole (a cookie jar, the stored body
/// of a revalidated response, the tool's session and resume files).
package enum DescriptorWrite {
    /// Writes every byte of `data` to `descriptor`, going on after short writes and `EINTR`.
    /// Returns nil when all were written, else the reason (`strerror` of the failure).
    package static func writeAll(_ data: Data, to descriptor: Int32) -> String? {
        data.withUnsafeBytes { buffer -> String? in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let written = write(descriptor, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return String(cString: strerror(errno))
                }
                // A regular file never takes 0 bytes of a non-empty write; a device might.
                if written == 0 { return "no byte could be written" }
                offset += written
            }
            return nil
        }
    }
}
