import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response's status line and header fields, kept as the bytes the server sent.
///
/// The session engine parses every response head into one of these on its driver thread:
/// field names and values stay in one byte buffer, and a `String` is made only for the field
/// someone asks for. Building Foundation's `HTTPURLResponse` costs far more than the request
/// itself on a fast connection (it canonicalises every field name through `NSString`), so
/// ``httpURLResponse`` builds it once, on first use, on the thread that asks — and the
/// built-in response serializers validate from the head without building it at all.
///
/// Lookups ignore ASCII case, and repeated fields read as one value joined with ", "
/// (RFC 9110 §5.3), as `HTTPURLResponse.value(forHTTPHeaderField:)` does.
public final class HTTPResponseHead: Sendable, CustomStringConvertible {
    /// Where one field's name and value sit in `storage`: the name runs up to where the value
    /// starts.
    private struct FieldRange {
        var nameStart: Int32
        var valueStart: Int32
        var valueEnd: Int32
        var nameEnd: Int32 { valueStart }
    }

    /// Bytes per field in the offsets that follow the field bytes in `storage`: three `Int32`
    /// (name start, value start, value end) in the machine's byte order, as the engine's
    /// parser records them.
    package static let offsetStride = 12

    /// The URL the response came from.
    public let url: URL
    /// The status code, 100...999.
    public let statusCode: Int
    /// The protocol from the status line: "HTTP/1.1", "HTTP/2".
    public let httpVersion: String
    /// The reason phrase exactly as the status line carried it ("OK", "Not Found", or whatever
    /// the server wrote); nil when the line had none (HTTP/2 and HTTP/3 never send one) or the
    /// head was not parsed from the wire. Tools that show the status line as sent read this.
    public let reasonPhrase: String?
    /// The field bytes (names and values, back to back), then each field's offsets into them:
    /// one allocation for the whole head.
    private let storage: [UInt8]
    /// Where the offsets start in `storage`.
    private let offsetsStart: Int
    /// The number of header fields (repeated fields counted each time).
    public let fieldCount: Int
    private let built = Mutex<HTTPURLResponse?>(nil)

    /// A head over field bytes the engine's parser collected (names and values, validated) and
    /// their offsets, `offsetStride` bytes per field; both are copied.
    package convenience init(
        url: URL, statusCode: Int, httpVersion: String, fieldBytes: UnsafeRawBufferPointer,
        offsets: UnsafeRawBufferPointer, reasonPhrase: String? = nil
    ) {
        self.init(
            url: url, statusCode: statusCode, httpVersion: httpVersion, reasonPhrase: reasonPhrase,
            storage: Self.pack(fieldBytes, offsets), offsetsStart: fieldBytes.count,
            fieldCount: offsets.count / Self.offsetStride)
    }

    private init(
        url: URL, statusCode: Int, httpVersion: String, reasonPhrase: String? = nil, storage: [UInt8],
        offsetsStart: Int, fieldCount: Int
    ) {
        self.url = url
        self.statusCode = statusCode
        self.httpVersion = httpVersion
        self.reasonPhrase = reasonPhrase
        self.storage = storage
        self.offsetsStart = offsetsStart
        self.fieldCount = fieldCount
    }

    /// `fieldBytes` then `offsets`, in one array.
    private static func pack(_ fieldBytes: UnsafeRawBufferPointer, _ offsets: UnsafeRawBufferPointer) -> [UInt8] {
        let total = fieldBytes.count + offsets.count
        return [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            if let target = UnsafeMutableRawPointer(buffer.baseAddress) {
                if let source = fieldBytes.baseAddress { target.copyMemory(from: source, byteCount: fieldBytes.count) }
                if let source = offsets.baseAddress { (target + fieldBytes.count).copyMemory(from: source, byteCount: offsets.count) }
            }
            initialized = total
        }
    }

    /// A head with these fields, in order (names as spelled, values without surrounding
    /// whitespace), and the status line's reason phrase if it had one.
    public convenience init(
        url: URL, statusCode: Int, httpVersion: String = "HTTP/1.1", reasonPhrase: String? = nil,
        fields: [(name: String, value: String)]
    ) {
        var bytes: [UInt8] = []
        var offsets: [Int32] = []
        for (name, value) in fields {
            offsets.append(Int32(clamping: bytes.count))
            bytes.append(contentsOf: name.utf8)
            offsets.append(Int32(clamping: bytes.count))
            bytes.append(contentsOf: value.utf8)
            offsets.append(Int32(clamping: bytes.count))
        }
        self.init(url: url, statusCode: statusCode, httpVersion: httpVersion, reasonPhrase: reasonPhrase, fieldBytes: bytes, offsets: offsets)
    }

    /// A head over `fieldBytes` (names and values back to back) and three offsets per field
    /// (name start, value start, value end), for a conversion that has the values as bytes.
    package convenience init(
        url: URL, statusCode: Int, httpVersion: String, reasonPhrase: String?, fieldBytes: [UInt8], offsets: [Int32]
    ) {
        let storage = fieldBytes.withUnsafeBytes { bytes in offsets.withUnsafeBytes { Self.pack(bytes, $0) } }
        self.init(
            url: url, statusCode: statusCode, httpVersion: httpVersion, reasonPhrase: reasonPhrase, storage: storage,
            offsetsStart: fieldBytes.count, fieldCount: offsets.count / 3)
    }

    /// The head of an existing `HTTPURLResponse`, which ``httpURLResponse`` then returns as is.
    /// Nil when the response has no URL.
    public convenience init?(_ response: HTTPURLResponse) {
        guard let url = response.url else { return nil }
        let fields = response.allHeaderFields.compactMap { key, value -> (name: String, value: String)? in
            guard let name = key as? String, let value = value as? String else { return nil }
            return (name, value)
        }
        self.init(url: url, statusCode: response.statusCode, fields: fields)
        built.withLock { $0 = response }
    }

    // MARK: Fields

    /// Every field in arrival order, names as the server spelled them.
    public var fields: [(name: String, value: String)] {
        (0..<fieldCount).map { index in
            let range = self.range(at: index)
            return (string(from: range.nameStart, to: range.nameEnd), string(from: range.valueStart, to: range.valueEnd))
        }
    }

    /// Calls `body` with each field's name and value bytes as they arrived, in order. A value
    /// that is not UTF-8 (`obs-text`: Latin-1 from an older server) keeps its bytes here,
    /// where ``fields`` shows U+FFFD in their place. The buffers are valid during the call only.
    public func forEachFieldBytes(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void) rethrows {
        try storage.withUnsafeBytes { bytes in
            for index in 0..<fieldCount {
                let range = Self.range(at: index, in: bytes, offsetsStart: offsetsStart)
                try body(
                    UnsafeRawBufferPointer(rebasing: bytes[Int(range.nameStart)..<Int(range.nameEnd)]),
                    UnsafeRawBufferPointer(rebasing: bytes[Int(range.valueStart)..<Int(range.valueEnd)]))
            }
        }
    }

    /// The value of the field `name` (ASCII case ignored); repeated fields joined with ", ".
    public func value(forHTTPHeaderField name: String) -> String? {
        var result: String?
        forEachField(named: name) { range in
            let value = string(from: range.valueStart, to: range.valueEnd)
            if let existing = result { result = existing + ", " + value } else { result = value }
            return true
        }
        return result
    }

    /// Every value of the field `name`, one per field line, in arrival order (for fields that
    /// must not be joined, such as `Set-Cookie`).
    public func values(forHTTPHeaderField name: String) -> [String] {
        var values: [String] = []
        forEachField(named: name) { range in
            values.append(string(from: range.valueStart, to: range.valueEnd))
            return true
        }
        return values
    }

    /// Whether a field `name` is present.
    public func contains(_ name: String) -> Bool {
        var found = false
        forEachField(named: name) { _ in
            found = true
            return false
        }
        return found
    }

    /// `Content-Length` as a number; -1 when absent, repeated with different values, or not
    /// a number (as `URLResponse.expectedContentLength`).
    public var expectedContentLength: Int64 {
        var result: Int64?
        var conflicting = false
        forEachField(named: "Content-Length") { range in
            guard let value = number(from: range.valueStart, to: range.valueEnd), result == nil || result == value else {
                conflicting = true
                return false
            }
            result = value
            return true
        }
        return conflicting ? -1 : result ?? -1
    }

    /// The media type of `Content-Type`, lowercased, without parameters ("application/json").
    public var mimeType: String? {
        guard let contentType = value(forHTTPHeaderField: "Content-Type") else { return nil }
        let type = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
        let trimmed = Self.trimmingSpaces(type)
        return trimmed.isEmpty ? nil : String(decoding: trimmed, as: UTF8.self).lowercased()
    }

    /// The `charset` parameter of `Content-Type`, lowercased and unquoted.
    public var textEncodingName: String? {
        guard let contentType = value(forHTTPHeaderField: "Content-Type") else { return nil }
        for parameter in contentType.utf8.split(separator: UInt8(ascii: ";")).dropFirst() {
            let pieces = parameter.split(separator: UInt8(ascii: "="), maxSplits: 1)
            guard pieces.count == 2,
                String(decoding: Self.trimmingSpaces(pieces[0]), as: UTF8.self).lowercased() == "charset"
            else { continue }
            var value = Self.trimmingSpaces(pieces[1])
            while let first = value.first, first == UInt8(ascii: "\"") || first == UInt8(ascii: "'") { value = value.dropFirst() }
            while let last = value.last, last == UInt8(ascii: "\"") || last == UInt8(ascii: "'") { value = value.dropLast() }
            return value.isEmpty ? nil : String(decoding: value, as: UTF8.self).lowercased()
        }
        return nil
    }

    // MARK: Foundation

    /// Foundation's `HTTPURLResponse` for this head, built on first use and then kept.
    /// Nil only if Foundation refuses the values.
    public var httpURLResponse: HTTPURLResponse? {
        built.withLock { cached in
            if let cached { return cached }
            let response = HTTPURLResponse(
                url: url, statusCode: statusCode, httpVersion: httpVersion, headerFields: headerDictionary)
            cached = response
            return response
        }
    }

    /// Whether ``httpURLResponse`` has been built (for tests of the fast paths).
    var isResponseBuilt: Bool { built.withLock { $0 != nil } }

    /// Whether ``httpURLResponse`` has been built or is being built now, without waiting for
    /// a build in progress (a monitor's queue may be building it): the driver frees only heads
    /// without a Foundation object (`AllocationReturn`), and the thread asking must not stall.
    package var mayHoldResponse: Bool { built.withLockIfAvailable { $0 != nil } ?? true }

    /// The fields folded into a dictionary, repeated fields joined with ", ", the first
    /// spelling of a name kept.
    public var headerDictionary: [String: String] {
        var result: [String: String] = [:]
        var spellings: [String: String] = [:]
        for (name, value) in fields {
            let key = name.lowercased()
            if let spelling = spellings[key] {
                result[spelling, default: ""] += ", " + value
            } else {
                spellings[key] = name
                result[name] = value
            }
        }
        return result
    }

    /// "HTTP/1.1 200, 8 fields".
    public var description: String { "\(httpVersion) \(statusCode), \(fieldCount) fields" }

    // MARK: Bytes

    /// The offsets of field `index`.
    private func range(at index: Int) -> FieldRange {
        storage.withUnsafeBytes { Self.range(at: index, in: $0, offsetsStart: offsetsStart) }
    }

    /// The offsets of field `index` in a head's `storage` opened as `bytes`.
    private static func range(at index: Int, in bytes: UnsafeRawBufferPointer, offsetsStart: Int) -> FieldRange {
        let at = offsetsStart + index * offsetStride
        return FieldRange(
            nameStart: bytes.loadUnaligned(fromByteOffset: at, as: Int32.self),
            valueStart: bytes.loadUnaligned(fromByteOffset: at + 4, as: Int32.self),
            valueEnd: bytes.loadUnaligned(fromByteOffset: at + 8, as: Int32.self))
    }

    private func string(from start: Int32, to end: Int32) -> String {
        storage.withUnsafeBufferPointer { buffer in
            String(decoding: UnsafeBufferPointer(rebasing: buffer[Int(start)..<Int(end)]), as: UTF8.self)
        }
    }

    /// Calls `body` with each field named `name` (ASCII case ignored), in order, until it
    /// returns false. The name's bytes and the storage are opened once for the whole scan:
    /// lookups run on the driver thread for every response.
    private func forEachField(named name: String, _ body: (FieldRange) -> Bool) {
        var name = name
        name.withUTF8 { wanted in
            storage.withUnsafeBufferPointer { buffer in
                let raw = UnsafeRawBufferPointer(buffer)
                for index in 0..<fieldCount {
                    let range = Self.range(at: index, in: raw, offsetsStart: offsetsStart)
                    guard Int(range.nameEnd - range.nameStart) == wanted.count else { continue }
                    let start = Int(range.nameStart)
                    var index = 0
                    while index < wanted.count, Self.lowercase(buffer[start + index]) == Self.lowercase(wanted[index]) {
                        index += 1
                    }
                    if index == wanted.count, !body(range) { return }
                }
            }
        }
    }

    private func number(from start: Int32, to end: Int32) -> Int64? {
        guard end > start, end - start <= 18 else { return nil }
        var value: Int64 = 0
        for index in Int(start)..<Int(end) {
            let byte = storage[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    private static func trimmingSpaces<C: BidirectionalCollection>(_ bytes: C) -> C.SubSequence where C.Element == UInt8 {
        var slice = bytes[...]
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return slice
    }
}
