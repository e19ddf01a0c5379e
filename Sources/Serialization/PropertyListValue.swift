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
    /// arrays, string-keyed dictionaries); nil values have no property-list form.
    static func foundationObject(from value: Any, path: String) throws -> Any {
        guard let value = ValueInspection.unwrapOptional(value), !(value is NSNull) else {
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
        throw SerializationError.invalidParameters(
            reason: "value of type \(type(of: value)) at \(path.isEmpty ? "top level" : path) has no property-list form",
            underlying: nil)
    }
}
