/// Lets ``ResponseSerialization/sendableResponseObject(for:response:data:)`` tell a nil
/// `Optional` output from a value.
protocol OptionalFlattening {
    /// True for `.none`, at any depth of nesting.
    var isNone: Bool { get }
}

extension Optional: OptionalFlattening {
    /// True for `.none`, at any depth of nesting.
    var isNone: Bool {
        switch self {
        case .none: return true
        case .some(let wrapped): return (wrapped as? any OptionalFlattening)?.isNone ?? false
        }
    }
}
