import Foundation

/// A JSON document as a Swift value: what ``JSONResponseSerializer`` produces.
///
/// Numbers keep their kind: integers that fit `Int` are ``int(_:)`` (so identifiers above
/// 2^53 keep every digit), everything else is ``double(_:)``. Equality is structural, so
/// `.int(1) != .double(1)`; compare through ``doubleValue`` when the kind does not matter.
///
/// ```
/// let value: JSONValue = ["name": "Curlew", "tags": ["a", "b"], "stars": 5]
/// value["tags"]?[1]?.stringValue   // "b"
/// ```
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits `Int`.
    case int(Int)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])

    /// The member named `key` of an object; nil for a missing key or a non-object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }

    /// The string, for ``string(_:)``.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer, for ``int(_:)`` and for a ``double(_:)`` that holds an exact integer.
    public var intValue: Int? {
        switch self {
        case .int(let value): return value
        case .double(let value): return Int(exactly: value)
        default: return nil
        }
    }

    /// The number as a `Double`, for ``int(_:)`` and ``double(_:)``.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    /// The Boolean, for ``bool(_:)``.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements, for ``array(_:)``.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members, for ``object(_:)``.
    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// True for ``null``.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A copy without `null`s inside containers, at every depth, as AFNetworking's
    /// `AFJSONObjectByRemovingKeysWithNullValues` does: object members whose value is `null`
    /// and array elements that are `null` are removed (`[null, {"a": null}]` → `[{}]`). A
    /// top-level `null` or scalar is returned unchanged.
    public func removingKeysWithNullValues() -> JSONValue {
        switch self {
        case .array(let elements):
            return .array(elements.filter { !$0.isNull }.map { $0.removingKeysWithNullValues() })
        case .object(let members):
            var result: [String: JSONValue] = [:]
            for (key, value) in members where !value.isNull {
                result[key] = value.removingKeysWithNullValues()
            }
            return .object(result)
        default:
            return self
        }
    }
}

// MARK: - Conversion to and from JSONSerialization objects

extension JSONValue {
    /// Converts an object made of `JSONSerialization` output (or of Swift values of the same
    /// shapes): `NSNull` or nil, `Bool`, integers, floating-point numbers, `NSNumber`,
    /// `String`, arrays and string-keyed dictionaries, and `JSONValue` itself.
    ///
    /// - Throws: ``SerializationError/invalidParameters(reason:underlying:)`` naming the first
    ///   value that has no JSON form (a `Date`, a non-finite number…).
    public init(jsonObject: Any) throws {
        self = try JSONValue.convert(jsonObject, path: "")
    }

    /// The value as a `JSONSerialization`-compatible object (`NSNull`, `Bool`, `Int`,
    /// `Double`, `String`, `[Any]`, `[String: Any]`).
    public var jsonObject: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let value): return value
        case .int(let value): return value
        case .double(let value): return value
        case .string(let value): return value
        case .array(let elements): return elements.map { $0.jsonObject }
        case .object(let members): return members.mapValues { $0.jsonObject }
        }
    }

    /// The recursive conversion behind ``init(jsonObject:)``; `path` names the position for errors.
    private static func convert(_ object: Any, path: String) throws -> JSONValue {
        guard let object = OptionalFlattening.unwrapped(object) else { return .null }
        // A metatype test, not `is NSNull`: on Linux that cast bridges a Swift dictionary or array
        // to Foundation first, its whole depth, which made converting nested JSON quadratic in
        // the nesting (400 levels: 110 ms; found while fuzzing json-nulls).
        if type(of: object) is NSNull.Type { return .null }
        switch object {
        case let value as JSONValue: return value
        case let value as String: return .string(value)
        case let value as Substring: return .string(String(value))
        default: break
        }
        if let number = ValueInspection.number(object) {
            switch number {
            case .bool(let value): return .bool(value)
            case .int(let value): return .int(value)
            case .double(let value):
                guard value.isFinite else {
                    throw SerializationError.invalidParameters(
                        reason: "non-finite number at \(path.isEmpty ? "top level" : path) has no JSON form",
                        underlying: nil)
                }
                return .double(value)
            case .exactDigits(_, let nearest):
                // `JSONValue` holds an `Int` or a `Double`: a larger integer (a parsed response's
                // `18446744073709551615`, or a parameter's `UInt64`) is the nearest `Double`.
                return .double(nearest)
            }
        }
        if let dictionary = ValueInspection.dictionary(object) {
            var members: [String: JSONValue] = [:]
            for (key, value) in dictionary {
                members[key] = try convert(value, path: path.isEmpty ? key : "\(path).\(key)")
            }
            return .object(members)
        }
        if let array = ValueInspection.array(object) {
            var elements: [JSONValue] = []
            elements.reserveCapacity(array.count)
            for (index, element) in array.enumerated() {
                elements.append(try convert(element, path: "\(path)[\(index)]"))
            }
            return .array(elements)
        }
        // A model inside a collection (`[Item]`, `["items": [Item]]`): its JSON is what its
        // `Encodable` conformance writes, as for a model given alone. A `Date` or `Data` has
        // no one JSON form: the caller chooses it.
        if !(object is Date), !(object is Data), let encodable = object as? any Encodable {
            let data: Data
            do {
                data = try JSONEncoder().encode(encodable)
            } catch {
                throw SerializationError.invalidParameters(
                    reason: "cannot encode \(type(of: object)) at \(path.isEmpty ? "top level" : path) as JSON", underlying: error)
            }
            return try JSONDecoder().decode(JSONValue.self, from: data)
        }
        throw SerializationError.invalidParameters(
            reason: "value of type \(type(of: object)) at \(path.isEmpty ? "top level" : path) has no JSON form",
            underlying: nil)
    }
}

// MARK: - Codable

extension JSONValue: Codable {
    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a JSON value")
        }
    }

    /// Encodes the value as the JSON it stands for.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByNilLiteral {
    /// `nil` is ``null``.
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// A Boolean literal is ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// An integer literal is ``int(_:)``.
    public init(integerLiteral value: Int) { self = .int(value) }
}

extension JSONValue: ExpressibleByFloatLiteral {
    /// A floating-point literal is ``double(_:)``.
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue: ExpressibleByStringLiteral {
    /// A string literal is ``string(_:)``.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// An array literal is ``array(_:)``.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// A dictionary literal is ``object(_:)``; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var members: [String: JSONValue] = [:]
        for (key, value) in elements { members[key] = value }
        self = .object(members)
    }
}
