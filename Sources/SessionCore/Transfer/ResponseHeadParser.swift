import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Turns the header lines libcurl hands to `CURLOPT_HEADERFUNCTION` into a response head.
///
/// libcurl calls the header callback once per line, status line included, for every
/// response it reads: interim `1xx` responses and the final one. Interim heads are
/// dropped; the final head completes at its empty line. Lines after that are trailers.
///
/// A class, reused by every transfer of one easy handle (`EasyHandle.headParser`): its field
/// buffer is allocated once, and a line costs a scan and one `memcpy`. Confinement: the
/// driver thread only, like the handle.
final class ResponseHeadParser {
    /// What a line did to the parser's state.
    enum Event: Equatable {
        /// Keep going.
        case needMore
        /// The final head is complete: take it with `makeHead(url:)`.
        case headComplete
        /// The head is not valid HTTP.
        case invalid(String)
        /// The head is larger than allowed.
        case tooLarge
        /// A status line after a complete head: libcurl sends the request again within the
        /// same transfer (its second pass of Digest authentication) and this is the next
        /// response. The previous head was not the transfer's answer; parsing goes on.
        case nextResponse
    }

    private(set) var statusCode = 0
    private(set) var httpVersion = "HTTP/1.1"
    /// The status line's reason phrase as sent (nil: none); `HTTPResponseHead.reasonPhrase`.
    private(set) var reasonPhrase: String?
    /// Field names and values, back to back; `fieldOffsets` says where each one is.
    private let storage = ByteBuffer()
    /// Per field, three `Int32` offsets into `storage`: where the name starts, where it ends
    /// and the value starts, where the value ends. A buffer of the parser's own, not an array
    /// property: appending to an array stored in a class costs a dynamic exclusivity check.
    private let fieldOffsets = ByteBuffer(capacity: 32 * 12)
    /// The head's own layout, so that `makeHead` copies the offsets as they are.
    private static let fieldStride = HTTPResponseHead.offsetStride
    private(set) var isComplete = false
    private(set) var headBytes = 0
    private var sawStatusLine = false
    private(set) var maximumBytes: Int
    /// The index of the one `Content-Length` field, and of the one `Content-Encoding` field,
    /// noted while the names were checked: -1 none, -2 more than one (the head's own lookups
    /// decide then). The transfer needs both for every response; this spares it a search.
    private var contentLengthField = -1
    private var contentEncodingField = -1
    /// Whether the head has a `Transfer-Encoding` field (a chunked body, whose received bytes
    /// libcurl counts only after each read's decoded bytes were written).
    private(set) var hasTransferCoding = false

    init(maximumBytes: Int) {
        self.maximumBytes = maximumBytes
    }

    /// Forgets everything, for the next response on a redirected or retried request, or the
    /// next transfer of the handle (with its limit).
    func reset(maximumBytes: Int? = nil) {
        if let maximumBytes { self.maximumBytes = maximumBytes }
        statusCode = 0
        httpVersion = "HTTP/1.1"
        reasonPhrase = nil
        clearFields()
        isComplete = false
        headBytes = 0
        sawStatusLine = false
    }

    /// The number of fields parsed so far.
    var fieldCount: Int { fieldOffsets.count / Self.fieldStride }

    /// Feeds one raw header line (with its CRLF) to the parser. Bytes only: no Foundation
    /// string work on the driver thread.
    func consume(_ bytes: UnsafeRawBufferPointer) -> Event {
        if isComplete {
            // Trailers are ignored; a status line ("HTTP/" cannot begin a field name) starts
            // the next response of the same transfer.
            guard Self.isStatusLine(bytes) else { return .needMore }
            reset()
            let event = consume(bytes)
            return event == .needMore ? .nextResponse : event
        }
        headBytes += bytes.count
        if headBytes > maximumBytes { return .tooLarge }

        var end = bytes.count
        if end >= 2 && bytes[end - 1] == 0x0A && bytes[end - 2] == 0x0D { end -= 2 }  // the usual CRLF
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        let line = UnsafeRawBufferPointer(rebasing: bytes[0..<end])

        if line.isEmpty {
            guard sawStatusLine else { return .invalid("empty line before the status line") }
            // 1xx heads (100 Continue, 103 Early Hints) are interim: the real one follows.
            // 101 Switching Protocols is final, but Curlew never asks for an upgrade.
            if (100..<200).contains(statusCode) && statusCode != 101 {
                sawStatusLine = false
                clearFields()
                return .needMore
            }
            isComplete = true
            return .headComplete
        }
        if Self.isStatusLine(line) {
            return parseStatusLine(line)
        }
        guard sawStatusLine else { return .invalid("header field before the status line") }
        if line[0] == 0x20 || line[0] == 0x09 {
            // obs-fold continuation (RFC 9112 §5.2): joins the previous field's value. The
            // previous value is the last thing in `storage`, so it simply grows.
            guard fieldCount > 0 else { return .invalid("continuation line without a field") }
            storage.append(0x20)
            appendValue(Self.trimmed(line, from: 0, to: line.count))
            fieldOffsets.setInt32(Int32(clamping: storage.count), at: fieldOffsets.count - 4)
            return .needMore
        }
        // The name: token bytes, then the colon (which is not a token byte), in one pass.
        var colon = 0
        let tokenBytes = Self.tokenTable.utf8Start
        while colon < line.count && tokenBytes[Int(line[colon])] == UInt8(ascii: "1") { colon += 1 }
        guard colon < line.count else { return .invalid("header line without a colon") }
        guard line[colon] == UInt8(ascii: ":") else { return Self.nameOrColonError(line, from: colon) }
        guard colon > 0 else { return .invalid("invalid header field name") }
        if colon == 14 || colon == 16 || colon == 17 { noteFramingField(UnsafeRawBufferPointer(rebasing: line[0..<colon])) }
        let nameStart = Int32(clamping: storage.count)
        storage.append(UnsafeRawBufferPointer(rebasing: line[0..<colon]))
        let valueStart = Int32(clamping: storage.count)
        appendValue(Self.trimmed(line, from: colon + 1, to: line.count))
        fieldOffsets.append(int32: nameStart, valueStart, Int32(clamping: storage.count))
        return .needMore
    }

    /// Whether `line` begins with "HTTP/".
    private static func isStatusLine(_ line: UnsafeRawBufferPointer) -> Bool {
        line.count >= 5 && line[0] == UInt8(ascii: "H") && line[1] == UInt8(ascii: "T") && line[2] == UInt8(ascii: "T")
            && line[3] == UInt8(ascii: "P") && line[4] == UInt8(ascii: "/")
    }

    /// Appends a field value; a control byte (CR, NUL, ...; tab excepted) becomes a space, as
    /// RFC 9110 §5.5 allows, so no value handed on can split a header line.
    private func appendValue(_ value: Slice<UnsafeRawBufferPointer>) {
        let bytes = UnsafeRawBufferPointer(rebasing: value)
        storage.append(bytes)
        guard !Self.allValueBytes(bytes) else { return }
        storage.replaceLast(bytes.count) { Self.isValueByte($0) ? $0 : 0x20 }
    }

    /// Whether every byte is a value byte, eight at a time: a word with no byte below 0x20
    /// and no 0x7F passes at once; only a word that might hold one (a tab, or a control
    /// byte) is looked at byte by byte.
    private static func allValueBytes(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var offset = 0
        while offset + 8 <= bytes.count {
            if hasControlByte(base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) {
                for index in offset..<(offset + 8) where !isValueByte(bytes[index]) { return false }
            }
            offset += 8
        }
        guard offset < bytes.count else { return true }
        if bytes.count >= 8 {
            // The last 0-7 bytes: the value's last eight, as one word (some looked at twice).
            let word = base.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self)
            return !hasControlByte(word) || !(bytes.count - 8..<bytes.count).contains { !isValueByte(bytes[$0]) }
        }
        for index in offset..<bytes.count where !isValueByte(bytes[index]) { return false }
        return true
    }

    /// Whether `word` may hold a byte below 0x20 or a 0x7F (a tab, which is a value byte,
    /// answers true too: the caller looks at such a word byte by byte).
    @inline(__always)
    private static func hasControlByte(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below20 = (word &- ones &* 0x20) & ~word & highs
        let flipped = word ^ (ones &* 0x7F)
        let is7F = (flipped &- ones) & ~flipped & highs
        return below20 | is7F != 0
    }

    /// RFC 9110 `tchar`: "1" at offset `b` when byte `b` is a token byte. A string literal's
    /// bytes in the binary's constant data (no lazy global, no cross-module call): one load
    /// and one compare per byte of a field name, where two 64-bit masks cost three more.
    private static var tokenTable: StaticString {
        """
        0000000000000000000000000000000001011111001101101111111111000000\
        0111111111111111111111111110001111111111111111111111111111101010\
        0000000000000000000000000000000000000000000000000000000000000000\
        0000000000000000000000000000000000000000000000000000000000000000
        """
    }

    /// `HTTPHeaderValidation.isValueByte`, inlined here: a cross-module call per byte cost
    /// more than the rest of the parse.
    @inline(__always)
    private static func isValueByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    /// A line whose name holds a non-token byte: the old rule's two answers (a line with no
    /// colon at all is reported as such).
    private static func nameOrColonError(_ line: UnsafeRawBufferPointer, from index: Int) -> Event {
        line[index...].contains(UInt8(ascii: ":")) ? .invalid("invalid header field name") : .invalid("header line without a colon")
    }

    /// `line[from..<to]` without leading and trailing spaces and tabs.
    private static func trimmed(_ line: UnsafeRawBufferPointer, from: Int, to: Int) -> Slice<UnsafeRawBufferPointer> {
        var start = from
        var end = to
        while start < end, line[start] == 0x20 || line[start] == 0x09 { start += 1 }
        while end > start, line[end - 1] == 0x20 || line[end - 1] == 0x09 { end -= 1 }
        return line[start..<end]
    }

    private func clearFields() {
        storage.removeAll()
        fieldOffsets.removeAll()
        contentLengthField = -1
        contentEncodingField = -1
        hasTransferCoding = false
    }

    /// Notes the field about to be added if `name` is `Content-Length`, `Content-Encoding`
    /// or `Transfer-Encoding`.
    private func noteFramingField(_ name: UnsafeRawBufferPointer) {
        if name.count == 14, Self.equalsIgnoringCase(name, "content-length") {
            contentLengthField = contentLengthField == -1 ? fieldCount : -2
        } else if name.count == 16, Self.equalsIgnoringCase(name, "content-encoding") {
            contentEncodingField = contentEncodingField == -1 ? fieldCount : -2
        } else if name.count == 17, Self.equalsIgnoringCase(name, "transfer-encoding") {
            hasTransferCoding = true
        }
    }

    /// `Content-Length` as `HTTPResponseHead.expectedContentLength` reads it (-1 when absent
    /// or not a number), or nil when the field came more than once.
    var expectedContentLength: Int64? {
        guard contentLengthField >= 0 else { return contentLengthField == -1 ? -1 : nil }
        let value = fieldValue(contentLengthField)
        guard !value.isEmpty, value.count <= 18 else { return -1 }
        var number: Int64 = 0
        for byte in value {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return -1 }
            number = number * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return number
    }

    /// Whether libcurl closes the connection once this answer is read, as it decides for
    /// HTTP/1.x (http.c): a `Connection` (or a forward proxy's `Proxy-Connection`) field with
    /// the token `close`; HTTP/1.0 without the token `keep-alive`; a body with neither a
    /// single length nor a transfer coding, which only the server's close ends. Never for
    /// HTTP/2. Scans the fields: asked only in the rare state that needs it
    /// (`TaskDelegate.didProgress`). (An error status that comes before the request body was
    /// all sent closes it too; the caller knows that, the head does not.)
    var closesConnection: Bool {
        let isHTTP10 = httpVersion == "HTTP/1.0"
        guard isHTTP10 || httpVersion == "HTTP/1.1" else { return false }
        var close = false
        var keepAlive = false
        for index in 0..<fieldCount where fieldNameIs(index, "connection") || fieldNameIs(index, "proxy-connection") {
            let value = fieldValue(index)
            var start = 0
            while start <= value.count {
                var end = start
                while end < value.count, value[end] != UInt8(ascii: ",") { end += 1 }
                let token = Self.trimmed(value, from: start, to: end)
                if token.count == 5, Self.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: token), "close") { close = true }
                if token.count == 10, Self.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: token), "keep-alive") { keepAlive = true }
                start = end + 1
            }
        }
        if close { return true }
        if isHTTP10 { return !keepAlive }
        return !hasTransferCoding && (expectedContentLength ?? -1) < 0
    }

    /// Whether field `index`'s name spells `lowercase` in any case.
    private func fieldNameIs(_ index: Int, _ lowercase: StaticString) -> Bool {
        let start = Int(fieldOffsets.int32(at: index * Self.fieldStride))
        let end = Int(fieldOffsets.int32(at: index * Self.fieldStride + 4))
        guard end - start == lowercase.utf8CodeUnitCount else { return false }
        return Self.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: storage.bytes[start..<end]), lowercase)
    }

    /// Whether the body has a content coding other than `identity` (a `Content-Encoding`
    /// field whose value is anything else), or nil when the field came more than once.
    var hasContentCoding: Bool? {
        guard contentEncodingField >= 0 else { return contentEncodingField == -1 ? false : nil }
        let value = fieldValue(contentEncodingField)
        return !(value.count == 8 && Self.equalsIgnoringCase(value, "identity"))
    }

    /// The value bytes of field `index` (valid until the parser changes).
    private func fieldValue(_ index: Int) -> UnsafeRawBufferPointer {
        let start = Int(fieldOffsets.int32(at: index * Self.fieldStride + 4))
        let end = Int(fieldOffsets.int32(at: index * Self.fieldStride + 8))
        return UnsafeRawBufferPointer(rebasing: storage.bytes[start..<end])
    }

    /// Whether `bytes` spell `lowercase` (ASCII letters in either case); same length assumed.
    private static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        lowercase.withUTF8Buffer { wanted in
            for index in 0..<wanted.count {
                let byte = bytes[index]
                let folded = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
                if folded != wanted[index] { return false }
            }
            return true
        }
    }

    private func parseStatusLine(_ line: UnsafeRawBufferPointer) -> Event {
        // "HTTP/1.1 200 OK", "HTTP/2 204" — reason phrases are optional.
        guard let space = line.firstIndex(of: 0x20) else { return malformed(line) }
        var codeStart = space
        while codeStart < line.count, line[codeStart] == 0x20 { codeStart += 1 }
        guard codeStart + 3 <= line.count, codeStart + 3 == line.count || line[codeStart + 3] == 0x20 else {
            return malformed(line)
        }
        var code = 0
        for index in codeStart..<(codeStart + 3) {
            let digit = line[index]
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return malformed(line) }
            code = code * 10 + Int(digit - UInt8(ascii: "0"))
        }
        guard code >= 100 else { return malformed(line) }
        httpVersion = Self.version(line[0..<space])
        statusCode = code
        reasonPhrase = Self.reason(line, from: codeStart + 3)
        clearFields()
        sawStatusLine = true
        return .needMore
    }

    /// The common spellings without building a new string each time.
    private static func version(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        let line = UnsafeRawBufferPointer(rebasing: bytes)  // begins with "HTTP/"
        if line.count == 8, line[5] == UInt8(ascii: "1"), line[6] == UInt8(ascii: ".") {
            if line[7] == UInt8(ascii: "1") { return "HTTP/1.1" }
            if line[7] == UInt8(ascii: "0") { return "HTTP/1.0" }
        }
        if line.count == 6, line[5] == UInt8(ascii: "2") { return "HTTP/2" }
        return String(decoding: line, as: UTF8.self)
    }

    /// The reason phrase after the status code (one space, then the rest of the line), a
    /// control byte made a space as in field values. "OK" without a new string, the common
    /// case; nil when nothing follows the code.
    private static func reason(_ line: UnsafeRawBufferPointer, from: Int) -> String? {
        guard from + 1 < line.count else { return nil }
        let phrase = UnsafeRawBufferPointer(rebasing: line[(from + 1)...])
        if phrase.count == 2, phrase[0] == UInt8(ascii: "O"), phrase[1] == UInt8(ascii: "K") { return "OK" }
        return String(decoding: phrase.map { isValueByte($0) ? $0 : 0x20 }, as: UTF8.self)
    }

    private func malformed(_ line: UnsafeRawBufferPointer) -> Event {
        .invalid("malformed status line '\(String(decoding: line.prefix(80), as: UTF8.self))'")
    }

    /// The complete head for `url`. The bytes are copied into the head (the parser keeps its
    /// buffers for the next response).
    func makeHead(url: URL) -> HTTPResponseHead {
        // The field bytes and the offsets exactly as recorded: one copy into one allocation.
        HTTPResponseHead(
            url: url, statusCode: statusCode, httpVersion: httpVersion, fieldBytes: storage.bytes,
            offsets: fieldOffsets.bytes, reasonPhrase: reasonPhrase)
    }
}
