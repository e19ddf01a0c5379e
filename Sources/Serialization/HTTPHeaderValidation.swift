import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Header and method checks that stop header injection before a request leaves the process.
enum HTTPHeaderValidation {
    /// True when `name` is an RFC 9110 token (header names and methods).
    static func isToken(_ name: String) -> Bool {
        guard !name.isEmpty else { return false }
        return name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    /// True when `value` holds no CR, LF, NUL or other control character (horizontal tab allowed).
    static func isValidValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }

    /// Throws ``SerializationError/invalidHeader(field:value:)`` for a bad name or value.
    static func validate(field: String, value: String) throws {
        guard isToken(field), isValidValue(value) else {
            throw SerializationError.invalidHeader(field: field, value: value)
        }
    }

    /// Validates every header of `request`.
    static func validate(_ request: URLRequest) throws {
        for (field, value) in request.allHTTPHeaderFields ?? [:] {
            try validate(field: field, value: value)
        }
    }
}
