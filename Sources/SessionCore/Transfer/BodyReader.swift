import Foundation
import Serialization
#if canImport(Glibc)
import Glibc
#endif

/// Feeds a request body to libcurl's read callback, on the driver thread only.
///
/// Files are read with `read(2)` straight into curl's buffer, so an upload never holds more
/// than one buffer of its body in memory. A multipart body made of data and files is read
/// the same way, throttled or not: a throttle is a send-rate cap (``sendRateCap``), paced by
/// libcurl, not a pause in the stream. Any stream that may block — a caller's `InputStream`,
/// a multipart body with a caller's stream part — is read on a ``BodyPump``'s queue into a
/// bounded buffer: the driver thread never waits on caller code or sleeps.
final class BodyReader {
    private enum Source {
        case data(Data, offset: Int)
        /// Read on the driver thread: a multipart body of data and files only.
        case stream(MultipartBodyStream, opened: Bool)
        /// Read on the pump's queue; `stream` is kept for rewinding a multipart body.
        case pumped(BodyPump, stream: InputStream)
        /// `identity`: the file when it was opened, held to at the body's end and at a rewind.
        case file(descriptor: Int32, identity: FileIdentity)
        /// A caller's async sequence (read through the feed's buffer; never rewound once read).
        case feed(AsyncBodyFeed)
    }

    /// What a read gave curl.
    enum ReadOutcome: Equatable {
        /// This many bytes (0: the body is complete).
        case bytes(Int)
        /// Nothing available yet: pause the transfer until the wake closure is called.
        case pause
        case failed(SessionError)
    }

    /// Called from another queue when a paused read can go on (see ``BodyPump``).
    private let wake: @Sendable () -> Void

    private var source: Source
    /// The declared length; nil means unknown (chunked transfer coding).
    let length: Int64?
    /// A throttled multipart body's rate in bytes per second
    /// (`MultipartBodyStream.sendRateCap`), sent as a cap on the transfer; nil otherwise.
    let sendRateCap: Double?
    private(set) var bytesRead: Int64 = 0
    /// Why the last ``rewind()`` failed, when the body could not be sent again for a reason
    /// of its own (a file changed since it was opened); nil for a stream that is spent.
    private(set) var rewindFailure: SessionError?

    /// Opens `body`; throws when a file cannot be opened. `wake` is called from another queue
    /// when a read that answered `.pause` can go on.
    init?(_ body: RequestBody, wake: @escaping @Sendable () -> Void) throws(SessionError) {
        self.wake = wake
        if case .stream(let stream, _) = body { sendRateCap = (stream as? MultipartBodyStream)?.sendRateCap } else { sendRateCap = nil }
        switch body {
        case .none:
            return nil
        case .data(let data):
            source = .data(data, offset: 0)
            length = Int64(data.count)
        case .stream(let stream, let declared):
            source = Self.streamSource(stream, wake: wake)
            length = declared
        case .file(let url):
            guard url.isFileURL else { throw .bodyStreamFailed("\(url) is not a file URL") }
            // O_NONBLOCK: this runs on the driver thread, and opening a FIFO for reading waits for
            // a writer (refused below); a regular file's reads do not heed the flag.
            let descriptor = open(url.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            guard descriptor >= 0 else {
                throw .bodyStreamFailed("cannot open \(url.path): \(String(cString: strerror(errno)))")
            }
            var info = stat()
            guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                close(descriptor)
                throw .bodyStreamFailed("\(url.path) is not a regular file")
            }
            source = .file(descriptor: descriptor, identity: FileIdentity(info))
            length = Int64(info.st_size)
        case .feed(let feed):
            feed.attach(wake: wake)
            source = .feed(feed)
            length = feed.length
        }
    }

    /// Streams that never block are read here; every other one through a pump.
    private static func streamSource(_ stream: InputStream, wake: @escaping @Sendable () -> Void) -> Source {
        // A stream of the task's own: the caller's may have been read by an earlier task made
        // from the same request, or be read by another one at the same time.
        if let multipart = stream as? MultipartBodyStream, let own = multipart.makeRewoundCopy() {
            return .stream(own, opened: false)
        }
        return .pumped(BodyPump(stream: stream, wake: wake), stream: stream)
    }

    /// Whether this reader reads the caller's `stream` itself (through a pump).
    func reads(_ stream: InputStream) -> Bool {
        if case .pumped(_, let own) = source { return own === stream }
        return false
    }

    /// Stops an async sequence's producer: the body is no longer sent (a 303 made the request
    /// a GET). It went on iterating the caller's sequence until the task ended.
    func stopProducing() {
        if case .feed(let feed) = source { feed.cancel() }
    }

    deinit {
        switch source {
        case .file(let descriptor, _): close(descriptor)
        case .stream(let stream, let opened) where opened: stream.close()
        case .pumped(let pump, _): pump.cancel()
        default: break
        }
    }

    /// A caller's stream that held more than its declared length (its `Content-Length`): libcurl
    /// sent that length and read no further, and the rest was dropped without a word while the
    /// server took the cut body for whole. Known only for what the pump had read ahead when
    /// the length was sent (a surplus the stream yields later is not waited for), as an async
    /// sequence's surplus is (`AsyncBodyFeed.finishTransfer`).
    var surplusFailure: SessionError? {
        guard case .pumped(let pump, _) = source, let length, bytesRead == length, pump.holdsUnsentBytes else { return nil }
        return .bodyStreamFailed("the body stream is longer than its declared length (\(length) bytes); the surplus was not sent")
    }

    /// Copies up to `buffer.count` bytes; `.bytes(0)` means the body is complete.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadOutcome {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .bytes(0) }
        var wanted = buffer.count
        if let length { wanted = Int(min(Int64(wanted), max(0, length - bytesRead))) }
        if wanted == 0 { return .bytes(0) }

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
            let result = stream.readPacket(base.assumingMemoryBound(to: UInt8.self), maxLength: wanted, ignoringPacketSize: true)
            if result < 0 {
                let reason = stream.streamError.map { "\($0)" } ?? "the stream reported an error"
                return .failed(.bodyStreamFailed(reason))
            }
            count = result
        case .pumped(let pump, _):
            switch pump.take(into: UnsafeMutableRawBufferPointer(start: base, count: wanted)) {
            case .bytes(let taken): count = taken
            case .end: count = 0
            case .wait: return .pause
            case .failed(let error): return .failed(error)
            }
        case .feed(let feed):
            switch feed.take(into: UnsafeMutableRawBufferPointer(start: base, count: wanted)) {
            case .bytes(let taken): count = taken
            case .end: count = 0
            case .wait: return .pause
            case .failed(let error): return .failed(error)
            }
        case .file(let descriptor, let identity):
            var result: Int
            repeat { result = Glibc.read(descriptor, base, wanted) } while result < 0 && errno == EINTR
            if result < 0 { return .failed(.bodyStreamFailed(String(cString: strerror(errno)))) }
            count = result
            // The last bytes: one `fstat` per upload says whether they and those before were the
            // file counted. A file written meanwhile (grown, rewritten in place) would otherwise
            // go out as a mix under the old length, which the server takes for the whole.
            if let length, bytesRead + Int64(count) == length, let change = Self.change(of: descriptor, since: identity) {
                return .failed(.bodyStreamFailed("the file changed while it was sent: \(change)"))
            }
        }
        bytesRead += Int64(count)
        if count == 0, let length, bytesRead < length {
            return .failed(.bodyStreamFailed("the body ended after \(bytesRead) of \(length) bytes"))
        }
        return .bytes(count)
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
            guard let copy = stream.makeRewoundCopy() else { return false }
            if opened { stream.close() }
            source = .stream(copy, opened: false)
        case .pumped(let pump, let stream):
            // Nothing taken yet: what the pump read ahead is still the body's start.
            guard bytesRead > 0 else { return true }
            guard let copy = (stream as? MultipartBodyStream)?.makeRewoundCopy() else { return false }
            pump.cancel()
            source = .pumped(BodyPump(stream: copy, wake: wake), stream: copy)
        case .file(let descriptor, let identity):
            // Sent again (a retry, a redirect, libcurl's resend on a new connection): only the
            // bytes the first attempt counted. The descriptor is the same inode, so a file
            // replaced by rename still reads as before; one written in place does not.
            if let change = Self.change(of: descriptor, since: identity) {
                rewindFailure = .bodyStreamFailed("the file cannot be sent again: \(change)")
                return false
            }
            guard lseek(descriptor, 0, SEEK_SET) == 0 else { return false }
        case .feed(let feed):
            guard feed.isRewindable else { return false }
        }
        bytesRead = 0
        return true
    }

    /// How the file open at `descriptor` changed since `identity`, in words; nil when it did not.
    private static func change(of descriptor: Int32, since identity: FileIdentity) -> String? {
        guard let now = FileIdentity(descriptor: descriptor) else { return "fstat failed (errno \(errno))" }
        return now.change(since: identity, when: "the upload began")
    }

    /// Whether the body can be sent again from the start.
    var isRewindable: Bool {
        switch source {
        case .stream(let stream, _) where bytesRead > 0:
            return stream.isRewindable
        case .pumped(_, let stream) where bytesRead > 0:
            return (stream as? MultipartBodyStream)?.isRewindable ?? false
        case .feed(let feed):
            return feed.isRewindable
        default:
            return true
        }
    }
}
