import Foundation
import Serialization
#if canImport(Glibc)
import Glibc
#endif

/// Feeds a request body to libcurl's read callback, on the driver thread only.
///
/// Files are read with `read(2)` straight into curl's buffer and streams in curl-sized
/// chunks, so an upload never holds more than one buffer of its body in memory.
final class BodyReader {
    private enum Source {
        case data(Data, offset: Int)
        case stream(InputStream, opened: Bool)
        case file(descriptor: Int32)
    }

    private var source: Source
    /// The declared length; nil means unknown (chunked transfer coding).
    let length: Int64?
    private(set) var bytesRead: Int64 = 0

    /// Opens `body`; throws when a file cannot be opened.
    init?(_ body: RequestBody) throws(SessionError) {
        switch body {
        case .none:
            return nil
        case .data(let data):
            source = .data(data, offset: 0)
            length = Int64(data.count)
        case .stream(let stream, let declared):
            source = .stream(stream, opened: false)
            length = declared
        case .file(let url):
            guard url.isFileURL else { throw .bodyStreamFailed("\(url) is not a file URL") }
            let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw .bodyStreamFailed("cannot open \(url.path): \(String(cString: strerror(errno)))")
            }
            var info = stat()
            guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                close(descriptor)
                throw .bodyStreamFailed("\(url.path) is not a regular file")
            }
            source = .file(descriptor: descriptor)
            length = Int64(info.st_size)
        }
    }

    deinit {
        switch source {
        case .file(let descriptor): close(descriptor)
        case .stream(let stream, let opened) where opened: stream.close()
        default: break
        }
    }

    /// Copies up to `buffer.count` bytes; 0 means the body is complete.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, SessionError> {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .success(0) }
        var wanted = buffer.count
        if let length { wanted = Int(min(Int64(wanted), max(0, length - bytesRead))) }
        if wanted == 0 { return .success(0) }

        let count: Int
        switch source {
        case .data(let data, let offset):
            count = min(wanted, data.count - offset)
            data.withUnsafeBytes { bytes in
                if let from = bytes.baseAddress { base.copyMemory(from: from + offset, byteCount: count) }
            }
            source = .data(data, offset: offset + count)
        case .stream(let stream, let opened):
            if !opened {
                stream.open()
                source = .stream(stream, opened: true)
            }
            let result = stream.read(base.assumingMemoryBound(to: UInt8.self), maxLength: wanted)
            if result < 0 {
                let reason = stream.streamError.map { "\($0)" } ?? "the stream reported an error"
                return .failure(.bodyStreamFailed(reason))
            }
            count = result
        case .file(let descriptor):
            var result: Int
            repeat { result = Glibc.read(descriptor, base, wanted) } while result < 0 && errno == EINTR
            if result < 0 { return .failure(.bodyStreamFailed(String(cString: strerror(errno)))) }
            count = result
        }
        bytesRead += Int64(count)
        if count == 0, let length, bytesRead < length {
            return .failure(.bodyStreamFailed("the body ended after \(bytesRead) of \(length) bytes"))
        }
        return .success(count)
    }

    /// Goes back to the start, as curl asks when it must resend (a reused connection that
    /// died, a 307/308 redirect). Streams cannot rewind.
    func rewind() -> Bool {
        switch source {
        case .data(let data, _):
            source = .data(data, offset: 0)
        case .stream(let stream, let opened):
            guard bytesRead > 0 else { return true }
            // A multipart body can be rebuilt over the same parts (files are reopened);
            // any other stream is spent once read.
            guard let copy = (stream as? MultipartBodyStream)?.makeRewoundCopy() else { return false }
            if opened { stream.close() }
            source = .stream(copy, opened: false)
        case .file(let descriptor):
            guard lseek(descriptor, 0, SEEK_SET) == 0 else { return false }
        }
        bytesRead = 0
        return true
    }

    /// Whether the body can be sent again from the start.
    var isRewindable: Bool {
        if case .stream(let stream, _) = source, bytesRead > 0 {
            return (stream as? MultipartBodyStream)?.isRewindable ?? false
        }
        return true
    }
}
