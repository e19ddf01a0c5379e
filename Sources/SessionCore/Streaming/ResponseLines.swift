import Foundation

/// A response body as UTF-8 lines, from `URLSessionManager.lines(for:)`.
///
/// LF, CRLF or a lone CR ends a line; lines come without their terminator, empty lines as
/// `""`; the last line needs no terminator; invalid UTF-8 becomes U+FFFD; a byte order mark
/// before the first line is dropped (it is no text: a first JSON line would not parse; it
/// still counts in the first line's length). A line longer than
/// ``maximumLineLength`` bytes ends the iteration with ``ResponseStreamError/lineTooLong(limit:)``
/// (and cancels the transfer) rather than growing without bound. Backpressure, cancellation
/// and single iteration are those of ``ResponseBytes``.
public struct ResponseLines: AsyncSequence, Sendable {
    /// One line, without its terminator.
    public typealias Element = String

    /// The bytes underneath.
    public let bytes: ResponseBytes
    /// The longest line accepted, in bytes (8 MiB unless given).
    public let maximumLineLength: Int

    /// Lines of `bytes`.
    public init(_ bytes: ResponseBytes, maximumLineLength: Int = 8 << 20) {
        self.bytes = bytes
        self.maximumLineLength = maximumLineLength
    }

    /// Creates the one iterator of this sequence.
    public func makeAsyncIterator() -> Iterator {
        Iterator(bytes.makeAsyncIterator(), splitter: LineSplitter(maximumLineLength: maximumLineLength))
    }

    /// Reads chunks and hands out the lines they complete.
    public struct Iterator: AsyncIteratorProtocol {
        private var chunks: ResponseBytes.Iterator
        private var splitter: LineSplitter
        private var ready: [String] = []
        private var readyIndex = 0
        private var isDone = false
        /// No line handed out yet: the first one loses a leading byte order mark.
        private var atStart = true
        /// A line over the limit, thrown once the lines before it were handed out.
        private var pendingFailure: ResponseStreamError?

        init(_ chunks: ResponseBytes.Iterator, splitter: LineSplitter) {
            self.chunks = chunks
            self.splitter = splitter
        }

        /// The next line, or nil after the last one.
        public mutating func next() async throws -> String? {
            while true {
                if readyIndex < ready.count {
                    defer { readyIndex += 1 }
                    return ready[readyIndex]
                }
                if let failure = pendingFailure {
                    pendingFailure = nil
                    throw failure
                }
                guard !isDone else { return nil }
                ready.removeAll(keepingCapacity: true)
                readyIndex = 0
                let next: Data?
                do {
                    next = try await chunks.next()
                } catch {
                    // Ended by the error: the unfinished line is cut, never handed out later
                    // as the body's last (the bytes' iterator returns nil after throwing).
                    isDone = true
                    throw error
                }
                guard let chunk = next else {
                    isDone = true
                    guard let last = splitter.finish() else { return nil }
                    // A body that was only a byte order mark has no lines, as an empty one.
                    let wasFirst = atStart
                    let line = firstLineChecked(last)
                    return wasFirst && line.isEmpty ? nil : line
                }
                let (lines, failure) = splitter.pushKeepingLines(chunk)
                ready = lines
                if atStart, let first = ready.first { ready[0] = firstLineChecked(first) }
                if let failure {
                    // The lines before the failure are delivered first, then the error.
                    isDone = true
                    pendingFailure = failure
                    chunks = ResponseBytes.Iterator(nil)  // drops the iteration: cancels the transfer
                }
            }
        }

        /// `line` without a leading U+FEFF when it is the body's first line.
        private mutating func firstLineChecked(_ line: String) -> String {
            guard atStart else { return line }
            atStart = false
            return line.unicodeScalars.first == "\u{FEFF}" ? String(line.unicodeScalars.dropFirst()) : line
        }
    }
}
