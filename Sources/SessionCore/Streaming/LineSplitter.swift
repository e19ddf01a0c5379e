import Foundation

/// Splits a byte stream into lines: LF, CRLF or a lone CR ends a line, a CRLF split across
/// two chunks still counts once. Lines are decoded as UTF-8, invalid sequences becoming
/// U+FFFD. Pure: fed by ``ResponseLines`` and the server-sent event reader.
struct LineSplitter {
    /// The longest line accepted, in bytes, without its terminator.
    let maximumLineLength: Int
    private var partial: [UInt8] = []
    /// The previous chunk ended with CR: an LF first in the next one belongs to it.
    private var pendingCR = false

    init(maximumLineLength: Int) {
        self.maximumLineLength = max(1, maximumLineLength)
    }

    /// The lines completed by `chunk`, in order; throws for a line over the limit (and the
    /// lines before it in the chunk are lost: readers use ``pushKeepingLines(_:)``).
    mutating func push(_ chunk: Data) throws(ResponseStreamError) -> [String] {
        let (lines, failure) = pushKeepingLines(chunk)
        if let failure { throw failure }
        return lines
    }

    /// The lines completed by `chunk`, in order, and the failure that stopped the split after
    /// them (a line over the limit): the lines come first, as they came before it.
    mutating func pushKeepingLines(_ chunk: Data) -> (lines: [String], failure: ResponseStreamError?) {
        var lines: [String] = []
        var failure: ResponseStreamError?
        chunk.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            do throws(ResponseStreamError) {
                try split(raw, into: &lines)
            } catch {
                failure = error
            }
        }
        return (lines, failure)
    }

    private mutating func split(_ raw: UnsafeRawBufferPointer, into lines: inout [String]) throws(ResponseStreamError) {
        let bytes = raw.bindMemory(to: UInt8.self)
        // An empty chunk says nothing of a CR before it: its LF may still come.
        guard !bytes.isEmpty else { return }
        var index = 0
        if pendingCR, bytes.first == UInt8(ascii: "\n") { index = 1 }
        pendingCR = false
        var start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") {
                try appendPartial(bytes, start..<index)
                lines.append(String(decoding: partial, as: UTF8.self))
                partial.removeAll(keepingCapacity: true)
                if byte == UInt8(ascii: "\r") {
                    if index + 1 < bytes.count {
                        if bytes[index + 1] == UInt8(ascii: "\n") { index += 1 }
                    } else {
                        pendingCR = true
                    }
                }
                start = index + 1
            }
            index += 1
        }
        try appendPartial(bytes, start..<bytes.count)
    }

    /// The last line, when the stream ended without a terminator after it.
    mutating func finish() -> String? {
        pendingCR = false
        guard !partial.isEmpty else { return nil }
        defer { partial.removeAll() }
        return String(decoding: partial, as: UTF8.self)
    }

    /// Forgets a half-received line (a reconnecting event stream starts afresh).
    mutating func reset() {
        partial.removeAll()
        pendingCR = false
    }

    private mutating func appendPartial(
        _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>
    ) throws(ResponseStreamError) {
        guard !range.isEmpty else { return }
        guard partial.count + range.count <= maximumLineLength else {
            throw .lineTooLong(limit: maximumLineLength)
        }
        partial.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[range]))
    }
}
