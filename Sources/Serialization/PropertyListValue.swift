import Foundation

/// Converts property-list objects between Foundation's `Any` form and `Sendable` Swift values.
enum PropertyListValue {
    /// The parsed property list as `Sendable` Swift values.
    static func sendable(from object: Any) throws -> any Sendable {
        switch object {
        case let value as String: return value
        case let value as Data: return value
        case let value as Date: return value
        default: break
        }
        if let number = ValueInspection.number(object) {
            switch number {
            case .bool(let value): return value
            case .int(let value): return value
            case .double(let value): return value
            case .exactDigits(let digits, let nearest): return UInt64(digits) ?? nearest
            }
        }
        if let dictionary = ValueInspection.dictionary(object) {
            var result: [String: any Sendable] = [:]
            for (key, value) in dictionary { result[key] = try sendable(from: value) }
            return result
        }
        if let array = ValueInspection.array(object) {
            return try array.map { try sendable(from: $0) }
        }
        throw CocoaError(.propertyListReadCorrupt,
                         userInfo: ["NSDebugDescription": "Unexpected property-list value of type \(type(of: object))"])
    }

    /// Parameters as a property-list object (`String`, `Bool`, numbers, `Date`, `Data`,
    /// arrays, string-keyed dictionaries); nil values and dictionaries with keys that are not
    /// strings have no property-list form and throw
    /// ``SerializationError/invalidParameters(reason:underlying:)`` naming where they are.
    static func foundationObject(from value: Any, path: String) throws -> Any {
        guard let value = OptionalFlattening.unwrapped(value), !(value is NSNull) else {
            throw SerializationError.invalidParameters(
                reason: "nil at \(path.isEmpty ? "top level" : path) has no property-list form", underlying: nil)
        }
        switch value {
        case let v as String: return v
        case let v as Data: return v
        case let v as Date: return v
        case let v as JSONValue:
            if v.isNull {
                throw SerializationError.invalidParameters(
                    reason: "null at \(path.isEmpty ? "top level" : path) has no property-list form", underlying: nil)
            }
            return try foundationObject(from: v.jsonObject, path: path)
        default: break
        }
        if let number = ValueInspection.number(value) {
            switch number {
            case .bool(let v): return v
            case .int(let v): return v
            case .double(let v): return v
            // A property list's integer holds a `UInt64` exactly; a longer `Decimal` is a real.
            case .exactDigits(let digits, let nearest): return UInt64(digits).map { NSNumber(value: $0) } ?? NSNumber(value: nearest)
            }
        }
        if let dictionary = ValueInspection.dictionary(value) {
            var result: [String: Any] = [:]
            for (key, element) in dictionary {
                result[key] = try foundationObject(from: element, path: path.isEmpty ? key : "\(path).\(key)")
            }
            return result
        }
        if let array = ValueInspection.array(value) {
            return try array.enumerated().map { try foundationObject(from: $0.element, path: "\(path)[\($0.offset)]") }
        }
        if let dictionary = ValueInspection.anyKeyDictionary(value) {
            throw nonStringKeyError(in: dictionary, path: path)
        }
        throw SerializationError.invalidParameters(
            reason: "value of type \(type(of: value)) at \(path.isEmpty ? "top level" : path) has no property-list form",
            underlying: nil)
    }

    /// A dictionary that is not string-keyed (`[Int: String]`, `[UUID: Data]`…): property-list
    /// dictionary keys are strings, and `PropertyListSerialization` (AFNetworking's encoder)
    /// refuses anything else. Names the key (the smallest, so the message is stable) and where
    /// the dictionary is.
    static func nonStringKeyError(in dictionary: [AnyHashable: Any], path: String) -> SerializationError {
        let keys = dictionary.keys.filter { !($0.base is String) }.map { "\($0.base) (\(type(of: $0.base)))" }
        let key = keys.min() ?? "?"
        return SerializationError.invalidParameters(
            reason: "the dictionary at \(path.isEmpty ? "top level" : path) has key \(key), which is not a string; "
                + "property-list dictionary keys must be strings",
            underlying: nil)
    }
}
