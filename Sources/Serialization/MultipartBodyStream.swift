import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The streamed body of a `multipart/form-data` request: an `InputStream` subclass that
/// produces the boundary lines, part headers and part bodies in order, reading files and
/// caller streams lazily, one chunk per ``read(_:maxLength:)`` (AFNetworking's
/// `AFMultipartBodyStream`). A 2 GB file never enters memory.
///
/// ``HTTPRequestSerializing/multipartFormRequest(method:urlString:parameters:constructingBodyWith:)``
/// puts it in the request's `httpBodyStream`, with `Content-Length` equal to ``contentLength``.
///
/// **For the session engine.** Find it with `request.httpBodyStream as? MultipartBodyStream`
/// and call ``read(_:maxLength:)`` repeatedly (from curl's read callback, say): it opens itself
/// on first use, returns between 1 and `maxLength` bytes while data remains, 0 at the end (after
/// exactly ``contentLength`` bytes) and -1 on failure with ``streamError`` set (a file that
/// shrank, a caller stream that ended early). It never blocks except on file I/O, on a
/// caller's stream part and, when throttling was requested, on the ``delay`` after each
/// packet. (Curlew's own engine never sleeps in it: it reads the body without the packet
/// pauses and sends it under a send-rate cap of ``packetSize`` / ``delay`` bytes per second,
/// paced by libcurl; a body with a caller's stream is read on another queue.)
/// ``makeRewoundCopy()`` gives a fresh stream over the same parts for a redirect or a retry.
///
/// **Threads.** Not thread-safe, like every `InputStream`: read it from one thread at a time
/// (successive calls may come from different threads if they never overlap).
public final class MultipartBodyStream: InputStream {
    /// Where a run of bytes comes from.
    enum Source {
        /// Bytes held in memory (boundaries, headers, small parts).
        case bytes(Data)
        /// `length` bytes of a file, opened when reached; `identity` is the file as it was
        /// when the part was added (nil: not checked).
        case file(URL, length: Int64, identity: FileIdentity?)
        /// `length` bytes of a caller's stream, opened when reached.
        case stream(InputStream, length: Int64)

        /// The number of bytes this source contributes.
        var length: Int64 {
            switch self {
            case .bytes(let data): return Int64(data.count)
            case .file(_, let length, _), .stream(_, let length): return length
            }
        }
    }

    /// The total number of bytes the stream produces: the exact `Content-Length`.
    public let contentLength: Int64
    /// The boundary, as in the `Content-Type` header.
    public let boundary: String
    /// The most bytes handed out per read when throttled; nil when not throttled.
    public let packetSize: Int?
    /// The pause after each throttled packet, in seconds; 0 when not throttled.
    public let delay: TimeInterval
    /// The bytes produced so far.
    public private(set) var numberOfBytesRead: Int64 = 0

    /// The sources in order.
    private let sources: [Source]
    /// The stream's state.
    private var status: Stream.Status = .notOpen
    /// The failure, once failed.
    private var failure: (any Error)?
    /// The source being read and the bytes of it already produced.
    private var sourceIndex = 0
    private var offsetInSource: Int64 = 0
    /// The open file or caller stream of the current source.
    private var fileHandle: FileHandle?
    private var openStream: InputStream?

    /// A stream over `sources`.
    /// - Precondition: the lengths add up to at most `Int64.max` (``MultipartFormDataBuilder``
    ///   checks before it builds one).
    init(sources: [Source], boundary: String, packetSize: Int?, delay: TimeInterval) {
        var merged: [Source] = []
        // Runs of bytes are gathered, then joined once: joining as they come copied the run so
        // far at every header and in-memory part (quadratic in the body's size).
        var run: [Data] = []
        func flush() {
            guard !run.isEmpty else { return }
            var joined = Data(capacity: run.reduce(0) { $0 + $1.count })
            for data in run { joined.append(data) }
            merged.append(.bytes(joined))
            run.removeAll()
        }
        for source in sources {
            if case .bytes(let data) = source {
                if !data.isEmpty { run.append(data) }
            } else if source.length > 0 {
                flush()
                merged.append(source)
            }
        }
        flush()
        self.sources = merged
        self.contentLength = merged.reduce(0) { $0 + $1.length }
        self.boundary = boundary
        self.packetSize = packetSize
        self.delay = packetSize == nil ? 0 : delay
        // swift-corelibs-foundation's InputStream has no plain designated initializer to call;
        // the empty data stream underneath is never used: every stream method is overridden.
        super.init(data: Data())
    }

    /// A new, unopened stream over the same parts, for sending the body again; nil when a part
    /// is a caller's `InputStream` (which cannot be rewound).
    public func makeRewoundCopy() -> MultipartBodyStream? {
        guard isRewindable else { return nil }
        return MultipartBodyStream(sources: sources, boundary: boundary, packetSize: packetSize, delay: delay)
    }

    /// Whether ``makeRewoundCopy()`` can rebuild this body: false when a part is a caller's
    /// `InputStream`, which can be read only once.
    public var isRewindable: Bool {
        !sources.contains { if case .stream = $0 { return true } else { return false } }
    }

    // MARK: InputStream

    /// Opens the stream (reading also opens it).
    public override func open() {
        if status == .notOpen { status = .open }
    }

    /// Closes the stream and any file or stream it has open.
    public override func close() {
        closeCurrentSource()
        if status != .error { status = .closed }
    }

    /// The stream's state.
    public override var streamStatus: Stream.Status { status }

    /// The failure, once ``streamStatus`` is `.error`.
    public override var streamError: (any Error)? { failure }

    /// True while bytes remain and the stream has not failed or closed.
    public override var hasBytesAvailable: Bool {
        switch status {
        case .notOpen, .open, .reading: return numberOfBytesRead < contentLength
        default: return false
        }
    }

    /// Direct buffer access is not supported.
    public override func getBuffer(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>,
                                   length len: UnsafeMutablePointer<Int>) -> Bool {
        false
    }

    /// No stream properties are supported.
    public override func property(forKey key: Stream.PropertyKey) -> AnyObject? { nil }

    /// No stream properties are supported.
    public override func setProperty(_ property: AnyObject?, forKey key: Stream.PropertyKey) -> Bool { false }

    /// Run-loop scheduling is not used: reads are synchronous.
    public override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    /// Run-loop scheduling is not used: reads are synchronous.
    public override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    /// Copies up to `len` bytes (at most ``packetSize`` when throttled) into `buffer`, then,
    /// when throttled, sleeps for ``delay``.
    /// Returns the count, 0 at the end, -1 on failure (see ``streamError``).
    public override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        let total = readPacket(buffer, maxLength: len)
        if delay > 0, total > 0 {
            Thread.sleep(forTimeInterval: delay)
        }
        return total
    }

    /// The throttle as a rate, in bytes per second (``packetSize`` / ``delay``); nil when not
    /// throttled or without a delay. The session engine sends the body under this cap
    /// (libcurl's `CURLOPT_MAX_SEND_SPEED_LARGE`) instead of pausing between packets.
    package var sendRateCap: Double? {
        guard let packetSize, delay > 0 else { return nil }
        return Double(packetSize) / delay
    }

    /// ``read(_:maxLength:)`` without the throttle's sleep: at most ``packetSize`` bytes
    /// unless `ignoringPacketSize` (the session engine, which paces the body with
    /// ``sendRateCap``, reads as much as curl asks for).
    package func readPacket(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int, ignoringPacketSize: Bool = false) -> Int {
        switch status {
        case .notOpen: status = .open
        case .open, .reading: break
        case .atEnd: return 0
        default: return -1
        }
        guard len > 0 else { return 0 }
        let limit = ignoringPacketSize ? len : min(len, packetSize ?? Int.max)
        status = .reading
        var total = 0
        do {
            while total < limit, sourceIndex < sources.count {
                let produced = try readCurrentSource(into: buffer + total, maxLength: limit - total)
                total += produced
                offsetInSource += Int64(produced)
                if offsetInSource >= sources[sourceIndex].length {
                    closeCurrentSource()
                    sourceIndex += 1
                    offsetInSource = 0
                } else if produced == 0 {
                    break
                }
            }
        } catch {
            closeCurrentSource()
            failure = error
            status = .error
            return -1
        }
        numberOfBytesRead += Int64(total)
        status = sourceIndex >= sources.count ? .atEnd : .open
        return total
    }

    // MARK: Sources

    /// Reads from the current source; throws when a file or stream ends early or fails.
    private func readCurrentSource(into buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) throws -> Int {
        let source = sources[sourceIndex]
        let remaining = source.length - offsetInSource
        let count = Int(min(Int64(maxLength), remaining))
        guard count > 0 else { return 0 }
        switch source {
        case .bytes(let data):
            let start = data.startIndex + Int(offsetInSource)
            data.copyBytes(to: buffer, from: start..<(start + count))
            return count
        case .file(let url, let length, let identity):
            let handle: FileHandle
            if let fileHandle {
                handle = fileHandle
            } else {
                // Without blocking: this may run on the driver thread, and a FIFO put at the
                // path after the part was added made `open` wait for a writer there, stalling
                // every transfer of the manager. Only a regular file is read.
                let descriptor = openForReadingWithoutBlocking(url.path)
                guard descriptor >= 0 else {
                    throw SerializationError.multipartFileUnreadable(url, reason: String(cString: strerror(errno)))
                }
                // Closed with it when a check below refuses the file.
                handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
                // The very file opened is compared with the one counted.
                var status = stat()
                guard fstat(descriptor, &status) == 0 else {
                    throw SerializationError.multipartFileUnreadable(url, reason: "fstat failed (errno \(errno))")
                }
                guard status.st_mode & S_IFMT == S_IFREG else {
                    throw SerializationError.multipartFileUnreadable(url, reason: "it is no longer a regular file")
                }
                if let identity, let change = FileIdentity(status).change(since: identity, when: "it was added") {
                    throw SerializationError.multipartFileUnreadable(url, reason: change)
                }
                fileHandle = handle
            }
            let produced = Self.readFile(handle.fileDescriptor, into: buffer, count: count)
            if produced < 0 {
                throw SerializationError.multipartFileUnreadable(url, reason: "read failed (errno \(errno))")
            }
            if produced == 0 {
                throw SerializationError.multipartFileUnreadable(
                    url, reason: "the file ended after \(offsetInSource) of \(length) bytes (did it change?)")
            }
            // The part's last bytes: one `fstat` says whether they and those before were the file
            // counted. One written meanwhile (grown, rewritten in place) would otherwise go out
            // as a mix of old and new bytes under the old length.
            if let identity, offsetInSource + Int64(produced) == length {
                guard let now = FileIdentity(descriptor: handle.fileDescriptor) else {
                    throw SerializationError.multipartFileUnreadable(url, reason: "fstat failed (errno \(errno))")
                }
                if let change = now.change(since: identity, when: "it was added") {
                    throw SerializationError.multipartFileUnreadable(url, reason: "it changed while it was sent: " + change)
                }
            }
            return produced
        case .stream(let stream, let length):
            if openStream == nil {
                if stream.streamStatus == .notOpen { stream.open() }
                openStream = stream
            }
            let read = stream.read(buffer, maxLength: count)
            if read < 0 {
                let cause = stream.streamError.map { String(describing: $0) } ?? "unknown error"
                throw SerializationError.multipartStreamFailed(reason: "a part's input stream failed: \(cause)")
            }
            if read == 0 {
                throw SerializationError.multipartStreamFailed(
                    reason: "a part's input stream ended after \(offsetInSource) of \(length) bytes")
            }
            return read
        }
    }

    /// Closes the file handle or caller stream of the current source.
    private func closeCurrentSource() {
        if let fileHandle {
            try? fileHandle.close()
            self.fileHandle = nil
        }
        if let openStream {
            openStream.close()
            self.openStream = nil
        }
    }

    /// `read(2)` straight into the caller's buffer, with no intermediate `Data` per chunk.
    /// Retries on `EINTR`; returns the count, 0 at end of file, -1 on failure.
    private static func readFile(_ descriptor: Int32, into buffer: UnsafeMutablePointer<UInt8>, count: Int) -> Int {
        while true {
            #if canImport(Glibc)
            let result = Glibc.read(descriptor, buffer, count)
            #elseif canImport(Musl)
            let result = Musl.read(descriptor, buffer, count)
            #else
            let result = Darwin.read(descriptor, buffer, count)
            #endif
            if result < 0 && errno == EINTR { continue }
            return result
        }
    }

    // MARK: Writing to a file

    /// Copies the body stream of `request` into a new file at `fileURL` (a rewound copy of a
    /// ``MultipartBodyStream`` when possible, so the request's own stream stays unread).
    static func writeBody(of request: URLRequest, to fileURL: URL) throws {
        guard let original = request.httpBodyStream else {
            throw SerializationError.invalidParameters(reason: "the request has no body stream to write", underlying: nil)
        }
        let stream: InputStream = (original as? MultipartBodyStream)?.makeRewoundCopy() ?? original
        guard FileManager.default.createFile(atPath: fileURL.path, contents: nil) else {
            throw SerializationError.multipartStreamFailed(reason: "cannot create \(fileURL.path)")
        }
        let output: FileHandle
        do {
            output = try FileHandle(forWritingTo: fileURL)
        } catch {
            throw SerializationError.multipartStreamFailed(reason: "cannot open \(fileURL.path): \(error)")
        }
        defer { try? output.close() }
        stream.open()
        defer { stream.close() }
        let capacity = 64 * 1024
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        defer { buffer.deallocate() }
        let multipart = stream as? MultipartBodyStream
        while true {
            // A throttled form's packets and delays are for the network: writing to a file,
            // they made a 100 MB form take minutes, the upload itself unthrottled.
            let count = multipart.map { $0.readPacket(buffer, maxLength: capacity, ignoringPacketSize: true) }
                ?? stream.read(buffer, maxLength: capacity)
            if count < 0 {
                let cause = stream.streamError.map { String(describing: $0) } ?? "unknown error"
                throw SerializationError.multipartStreamFailed(reason: "reading the body failed: \(cause)")
            }
            if count == 0 { break }
            do {
                try output.write(contentsOf: Data(bytesNoCopy: buffer, count: count, deallocator: .none))
            } catch {
                throw SerializationError.multipartStreamFailed(reason: "writing \(fileURL.path) failed: \(error)")
            }
        }
    }
}

/// Opens `path` for reading without waiting: a FIFO (or a device) at the path returns at once
/// rather than waiting for a writer, and is then refused by its `fstat`. Outside the stream
/// class, whose `open()` method would shadow the system call.
private func openForReadingWithoutBlocking(_ path: String) -> Int32 {
    open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
}
