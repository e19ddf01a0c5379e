import Foundation

/// Looks inside `Any` values handed in as parameters or produced by Foundation's parsers:
/// numbers (including `NSNumber` and its Boolean flavour), dictionaries, arrays, sets.
/// (Optionals: ``OptionalFlattening``.)
enum ValueInspection {
    /// A number, classified.
    enum Number {
        case bool(Bool)
        case int(Int)
        case double(Double)
        /// A number no `Int` or `Double` holds exactly (a `UInt64` above `Int.max`, a `Decimal`
        /// with more digits than a `Double` keeps): its exact decimal digits, and the nearest
        /// `Double`. A query string and a property list send it exactly; a `JSONValue` holds
        /// the nearest `Double`.
        case exactDigits(String, nearest: Double)
    }

    /// `value`'s digits as written (its shortest form) in a `Double`: `Float(0.1)` widened as
    /// is went out as `0.10000000149011612`.
    private static func double(of value: Float) -> Double {
        Double(String(describing: value)) ?? Double(value)
    }

    /// An unsigned value above `Int.max` keeps its digits.
    private static func number(unsigned value: UInt64) -> Number {
        Int(exactly: value).map { .int($0) } ?? .exactDigits(String(value), nearest: Double(value))
    }

    /// A `Decimal` as an `Int` or a `Double` when one holds it exactly, else its digits.
    private static func number(decimal value: Decimal) -> Number {
        let text = value.description
        if let integer = Int(text) { return .int(integer) }
        if let nearest = Double(text), value.isFinite, Decimal(string: String(describing: nearest)) == value {
            return .double(nearest)
        }
        return .exactDigits(text, nearest: NSDecimalNumber(decimal: value).doubleValue)
    }

    /// The value as a number when it is one. Swift numeric types are told apart by type first,
    /// so a Swift `Int` never turns into a Boolean through `NSNumber` bridging.
    static func number(_ value: Any) -> Number? {
        switch value {
        case let v as Bool where type(of: value) == Bool.self: return .bool(v)
        case let v as Int where type(of: value) == Int.self: return .int(v)
        case let v as Double where type(of: value) == Double.self: return .double(v)
        case let v as Float where type(of: value) == Float.self: return .double(double(of: v))
        case let v as Int8 where type(of: value) == Int8.self: return .int(Int(v))
        case let v as Int16 where type(of: value) == Int16.self: return .int(Int(v))
        case let v as Int32 where type(of: value) == Int32.self: return .int(Int(v))
        case let v as Int64 where type(of: value) == Int64.self: return .int(Int(v))
        case let v as UInt8 where type(of: value) == UInt8.self: return .int(Int(v))
        case let v as UInt16 where type(of: value) == UInt16.self: return .int(Int(v))
        case let v as UInt32 where type(of: value) == UInt32.self: return .int(Int(v))
        case let v as UInt where type(of: value) == UInt.self: return number(unsigned: UInt64(v))
        case let v as UInt64 where type(of: value) == UInt64.self: return number(unsigned: v)
        case let v as Decimal where type(of: value) == Decimal.self: return number(decimal: v)
        default: break
        }
        // A long decimal from JSONSerialization (more than 17 digits) or a caller's: its kind is
        // "d", which would round it.
        if let decimal = value as? NSDecimalNumber, type(of: value) is NSDecimalNumber.Type {
            return number(decimal: decimal.decimalValue)
        }
        guard type(of: value) is NSNumber.Type, let number = value as? NSNumber else { return nil }
        let kind = String(cString: number.objCType)
        switch kind {
        case "c", "B": return .bool(number.boolValue)
        case "f": return .double(double(of: number.floatValue))
        case "d": return .double(number.doubleValue)
        case "Q", "L": return self.number(unsigned: number.uint64Value)
        default: return .int(number.intValue)
        }
    }

    /// The value as a string-keyed dictionary, when it is a dictionary with `String` keys.
    static func dictionary(_ value: Any) -> [String: Any]? {
        value as? [String: Any]
    }

    /// The value as a dictionary with any hashable keys.
    static func anyKeyDictionary(_ value: Any) -> [AnyHashable: Any]? {
        if let dictionary = value as? [String: Any] {
            var result: [AnyHashable: Any] = [:]
            for (key, element) in dictionary { result[AnyHashable(key)] = element }
            return result
        }
        return value as? [AnyHashable: Any]
    }

    /// The value as an array (not a set, not a string, not `Data`).
    static func array(_ value: Any) -> [Any]? {
        if value is String || value is Data { return nil }
        return value as? [Any]
    }

    /// The value as the elements of a set.
    static func set(_ value: Any) -> [Any]? {
        guard let set = value as? Set<AnyHashable> else { return nil }
        return set.map { $0.base }
    }
}
