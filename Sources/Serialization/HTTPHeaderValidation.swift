import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one rule for what a request may carry in its method, header names, header values and
/// URL, shared by the serializers and by `SessionCore`'s engine (which checks every request,
/// however it was built) so that both refuse exactly the same input. Each caller throws its
/// own error type; only the predicates live here.
///
/// The rule is RFC 9110's, checked on the UTF-8 bytes that go on the wire:
/// - **Names and methods** are `token`s (§5.1, §9.1): one or more of
///   ``ALPHA / DIGIT / !#$%&'*+-.^_`|~``.
/// - **Values** (§5.5) are made of `field-vchar` (VCHAR `0x21–0x7E` and obs-text `0x80–0xFF`),
///   SP and HTAB. HTAB is allowed: it is ordinary whitespace inside a value and optional
///   whitespace around it. CR, LF and NUL are refused: §5.5 calls them "invalid and dangerous"
///   (CR/LF end the field and let a value inject headers or a second request). The other C0
///   controls (`0x01–0x08`, `0x0B`, `0x0C`, `0x0E–0x1F`) and DEL (`0x7F`) are refused too: they
///   are not `field-content` either, recipients may reject the message or treat them
///   differently (gunicorn answers 400), and no legitimate value needs one, so refusing them
///   here turns a server-dependent failure into a clear local error. Non-ASCII characters
///   become bytes `0x80–0xFF` (obs-text) and are allowed; they cannot break the framing.
/// - **URLs** contain no byte `0x00–0x20` or `0x7F`: RFC 3986 has no raw space or control
///   character, and a server would refuse or reinterpret one.
package enum HTTPHeaderValidation {
    /// True when `byte` is an RFC 9110 `tchar`.
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// True when `name` is an RFC 9110 token (header names and methods).
    package static func isToken(_ name: some StringProtocol) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(isTokenByte)
    }

    /// ``isToken(_:)`` for a `String`, over its contiguous UTF-8 (the per-request path).
    package static func isToken(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { !$0.isEmpty && $0.allSatisfy(isTokenByte) }
    }

    /// True when `byte` may appear in a header value: HTAB, SP, VCHAR or obs-text.
    package static func isValueByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    /// True when `value` holds no CR, LF, NUL, other C0 control or DEL (horizontal tab allowed).
    package static func isValidValue(_ value: some StringProtocol) -> Bool {
        value.utf8.allSatisfy(isValueByte)
    }

    /// ``isValidValue(_:)`` for a `String`, over its contiguous UTF-8 (the per-request path).
    package static func isValidValue(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { $0.allSatisfy(isValueByte) }
    }

    /// True when `string` holds no space, C0 control or DEL (the raw bytes a URL never has).
    package static func isValidURLString(_ string: some StringProtocol) -> Bool {
        string.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F }
    }

    /// ``isValidURLString(_:)`` for a `String`, over its contiguous UTF-8 (the per-request path).
    package static func isValidURLString(_ string: String) -> Bool {
        var string = string
        return string.withUTF8 { $0.allSatisfy { $0 > 0x20 && $0 != 0x7F } }
    }

    /// Throws ``SerializationError/invalidHeader(field:value:)`` for a bad name or value.
    package static func validate(field: String, value: String) throws(SerializationError) {
        guard isToken(field), isValidValue(value) else {
            throw SerializationError.invalidHeader(field: field, value: value)
        }
    }

    /// Validates every header of `request`.
    static func validate(_ request: URLRequest) throws(SerializationError) {
        for (field, value) in request.allHTTPHeaderFields ?? [:] {
            try validate(field: field, value: value)
        }
    }
}
