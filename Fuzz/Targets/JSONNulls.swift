import Foundation
@testable import Serialization

// Target: JSON parsing with null stripping (`JSONResponseSerializer.removesKeysWithNullValues`,
// `JSONValue.removingKeysWithNullValues()`, Sources/Serialization/). Properties: the result has
// no null inside any container; stripping again changes nothing; it equals a reference strip
// of the unstripped value (every non-null member and element kept, in order).

private func containsNestedNull(_ value: JSONValue) -> Bool {
    switch value {
    case .array(let elements): return elements.contains { $0.isNull || containsNestedNull($0) }
    case .object(let members): return members.values.contains { $0.isNull || containsNestedNull($0) }
    default: return false
    }
}

private func reference(_ value: JSONValue) -> JSONValue {
    switch value {
    // Not `compactMap { $0.isNull ? nil : ... }`: JSONValue is ExpressibleByNilLiteral, so
    // that `nil` would be `.null` and be kept.
    case .array(let elements): return .array(elements.filter { !$0.isNull }.map(reference))
    case .object(let members): return .object(members.filter { !$0.value.isNull }.mapValues(reference))
    default: return value
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONNulls(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    var plain = JSONResponseSerializer()
    plain.readingOptions = [.fragmentsAllowed]
    plain.acceptableContentTypes = nil
    var stripping = plain
    stripping.removesKeysWithNullValues = true
    guard let original = try? plain.responseObject(for: nil, data: bytes) else { return 0 }
    guard let stripped = try? stripping.responseObject(for: nil, data: bytes) else {
        fuzzCheck(false, "parses without stripping, fails with it")
        return 0
    }
    fuzzCheck(!containsNestedNull(stripped), "a null is left in \(stripped)")
    fuzzCheck(stripped.removingKeysWithNullValues() == stripped, "stripping twice changes \(stripped)")
    fuzzCheck(stripped == reference(original), "\(stripped) != reference strip of \(original)")
    return 0
}
