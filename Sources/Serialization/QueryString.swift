import Foundation

/// Percent-escapes `string` for a URL query component or a form body, with AFNetworking's
/// rules (`AFPercentEscapedStringFromString`): everything but the RFC 3986 unreserved
/// characters (`A–Z a–z 0–9 - . _ ~`) and `/` and `?` is escaped, from the UTF-8 bytes of each
/// character. A space becomes `%20`, never `+`. Because whole characters are escaped, a
/// composed character or an emoji with modifiers is never split.
///
/// ```
/// percentEscapedString("a b&c")   // "a%20b%26c"
/// ```
public func percentEscapedString(_ string: String) -> String {
    QueryStringEncoder.escape(string)
}

/// The query string for `parameters` with AFNetworking's rules (`AFQueryStringFromParameters`):
/// keys sorted; nested dictionaries as `a[b]=c`; arrays as `a[]=1&a[]=2`; set members under the
/// same key, sorted; `nil` and `NSNull` as the bare key; Booleans as `1` / `0`; every field and
/// value percent-escaped with ``percentEscapedString(_:)``, so brackets appear as `%5B` and `%5D`.
/// An `Encodable` value that fails to encode is left out (the request serializers throw
/// `SerializationError.invalidParameters` for it instead).
///
/// ```
/// queryString(from: ["b": 1, "a": ["x": "y"]])   // "a%5Bx%5D=y&b=1"
/// ```
public func queryString(from parameters: [String: any Sendable]) -> String {
    QueryStringEncoder.queryString(fromDictionary: parameters)
}

/// The query-string machinery behind ``queryString(from:)`` and the request serializers.
enum QueryStringEncoder {
    /// One `field=value` pair; a nil value is written as the bare field.
    struct Pair {
        let field: String
        let value: String?
        /// The raw bytes when the value was `Data` (multipart parts send them unchanged).
        var data: Data? = nil

        /// The escaped `field=value` (or `field`).
        var encoded: String {
            guard let value else { return escape(field) }
            return escape(field) + "=" + escape(value)
        }
    }

    /// Uppercase hexadecimal digits.
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// Escapes the UTF-8 bytes of `string` outside the allowed set.
    static func escape(_ string: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            if isAllowed(byte) {
                bytes.append(byte)
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Unreserved characters plus `/` and `?`.
    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
             UInt8(ascii: "/"), UInt8(ascii: "?"):
            return true
        default:
            return false
        }
    }

    /// The query string of a dictionary.
    static func queryString(fromDictionary dictionary: [String: any Sendable]) -> String {
        var pairs: [Pair] = []
        // Not throwing (AFNetworking's function): a value that cannot be encoded is left out,
        // the other pairs kept; the request serializers throw for it instead.
        try? appendPairs(key: nil, value: dictionary, to: &pairs, strict: false)
        return pairs.map(\.encoded).joined(separator: "&")
    }

    /// The query string of request parameters: a dictionary, a ``JSONValue`` object, or an
    /// `Encodable` value that encodes as a keyed container.
    static func queryString(fromParameters parameters: Any) throws -> String {
        let object = try keyedObject(fromParameters: parameters)
        var pairs: [Pair] = []
        try appendPairs(key: nil, value: object, to: &pairs)
        return pairs.map(\.encoded).joined(separator: "&")
    }

    /// The field/value pairs of `parameters`, unescaped (for multipart form parts).
    static func pairs(fromParameters parameters: Any) throws -> [Pair] {
        let object = try keyedObject(fromParameters: parameters)
        var pairs: [Pair] = []
        try appendPairs(key: nil, value: object, to: &pairs)
        return pairs
    }

    /// Parameters as a dictionary, or an error explaining why they cannot be one.
    private static func keyedObject(fromParameters parameters: Any) throws -> [AnyHashable: Any] {
        let unwrapped = OptionalFlattening.unwrapped(parameters) ?? NSNull()
        var object: Any = unwrapped
        if let json = unwrapped as? JSONValue {
            object = json.jsonObject
        } else if ValueInspection.anyKeyDictionary(unwrapped) == nil, let encodable = unwrapped as? any Encodable {
            object = try encodedObject(encodable)
        }
        guard let dictionary = ValueInspection.anyKeyDictionary(object) else {
            throw SerializationError.invalidParameters(
                reason: "URL-encoded parameters must be a dictionary (or encode as one), got \(type(of: unwrapped))",
                underlying: nil)
        }
        return dictionary
    }

    /// An `Encodable` value as a `JSONSerialization` object.
    static func encodedObject(_ value: any Encodable) throws -> Any {
        do {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            let data = try encoder.encode(value)
            return try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch let error as SerializationError {
            throw error
        } catch {
            throw SerializationError.invalidParameters(
                reason: "cannot encode \(type(of: value))", underlying: error)
        }
    }

    /// AFNetworking's `AFQueryStringPairsFromKeyAndValue`.
    /// `strict`: a value that fails to encode throws (the request serializers); otherwise that
    /// pair alone is left out (the non-throwing ``queryString(from:)``).
    private static func appendPairs(key: String?, value: Any, to pairs: inout [Pair], strict: Bool = true) throws {
        guard let value = OptionalFlattening.unwrapped(value), !(value is NSNull) else {
            if let key { pairs.append(Pair(field: key, value: nil)) }
            return
        }
        if let json = value as? JSONValue {
            try appendPairs(key: key, value: json.jsonObject, to: &pairs, strict: strict)
            return
        }
        if let dictionary = ValueInspection.anyKeyDictionary(value) {
            let entries = dictionary.map { (name: String(describing: $0.key.base), value: $0.value) }
            for entry in entries.sorted(by: { $0.name < $1.name }) {
                try appendPairs(key: key.map { "\($0)[\(entry.name)]" } ?? entry.name, value: entry.value, to: &pairs, strict: strict)
            }
            return
        }
        if let array = ValueInspection.array(value) {
            for element in array {
                try appendPairs(key: "\(key ?? "")[]", value: element, to: &pairs, strict: strict)
            }
            return
        }
        if let members = ValueInspection.set(value) {
            let sorted = members.map { (text: scalarDescription($0), value: $0) }.sorted { $0.text < $1.text }
            for member in sorted {
                try appendPairs(key: key, value: member.value, to: &pairs, strict: strict)
            }
            return
        }
        guard let key else { return }
        if isScalar(value) == false, let encodable = value as? any Encodable {
            // A model's members, or the one value an enum or a wrapper encodes to (`Sort.ascending`
            // is `asc`, not the case's name). One that fails to encode (a NaN the encoder
            // refuses) is an error: its debug description (`Loc(lat: nan)`) was sent instead.
            let object: Any
            do {
                object = try encodedObject(encodable)
            } catch {
                guard strict else { return }
                throw SerializationError.invalidParameters(
                    reason: "the value of '\(key)' could not be encoded: \(error)", underlying: error)
            }
            if !isScalar(object) || object is NSNull {
                try appendPairs(key: key, value: object, to: &pairs, strict: strict)
            } else {
                pairs.append(Pair(field: key, value: scalarDescription(object), data: nil))
            }
            return
        }
        pairs.append(Pair(field: key, value: scalarDescription(value), data: value as? Data))
    }

    /// True for values written directly as text.
    private static func isScalar(_ value: Any) -> Bool {
        if value is String || value is Substring || value is Character || value is Data || value is Date
            || value is URL || value is UUID || value is NSNull {
            return true
        }
        return ValueInspection.number(value) != nil
    }

    /// The text of a scalar value: numbers without a trailing `.0`, Booleans as `1`/`0`,
    /// dates in ISO 8601, `Data` in base64, URLs absolute, UUIDs uppercase.
    static func scalarDescription(_ value: Any) -> String {
        switch value {
        case let v as String: return v
        case let v as Substring: return String(v)
        case let v as Character: return String(v)
        case let v as Data: return v.base64EncodedString()
        case let v as Date: return ISO8601DateFormatter().string(from: v)
        case let v as URL: return v.absoluteString
        case let v as UUID: return v.uuidString
        default: break
        }
        if let number = ValueInspection.number(value) {
            switch number {
            case .bool(let v): return v ? "1" : "0"
            case .int(let v): return String(v)
            case .double(let v):
                if v.rounded() == v, abs(v) < 1e15 { return String(Int64(v)) }
                return String(describing: v)
            case .exactDigits(let digits, _): return digits
            }
        }
        return String(describing: value)
    }
}
