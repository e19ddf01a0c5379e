/// Looks through the `Optional` layers of a value whose type is known only at run time: the one
/// helper for that in `Serialization` and `SessionCore`.
///
/// Parameters arrive as `any Sendable` and serializer outputs as `Output` or `any Sendable`;
/// either can be an `Optional` (even a nested one such as `JSONValue??`) hidden in the
/// existential, where `== nil` cannot see it.
package enum OptionalFlattening {
    /// The innermost wrapped value of an `Optional` (at any depth of nesting), nil for `.none`
    /// at any depth, and `value` itself when it is not an `Optional`.
    package static func unwrapped(_ value: Any) -> Any? {
        guard let optional = value as? any AnyOptional else { return value }
        guard let wrapped = optional.wrappedAsAny else { return nil }
        return unwrapped(wrapped)
    }

    /// True for an `Optional.none` at any depth of nesting.
    package static func isNone(_ value: Any) -> Bool {
        unwrapped(value) == nil
    }

    /// A boxed value, or nil when it is a boxed `Optional.none` (serializers with optional
    /// outputs such as `JSONValue?` box them as they are). A `.some` stays wrapped as it was:
    /// `as? T` looks through it, and Swift cannot re-box its payload as `any Sendable`
    /// generically.
    package static func nonNone(_ value: any Sendable) -> (any Sendable)? {
        isNone(value) ? nil : value
    }
}

/// Lets ``OptionalFlattening`` open an `Optional` whose wrapped type it does not know.
private protocol AnyOptional {
    /// The payload of `.some`, nil for `.none`.
    var wrappedAsAny: Any? { get }
}

extension Optional: AnyOptional {
    fileprivate var wrappedAsAny: Any? {
        switch self {
        case .none: return nil
        case .some(let wrapped): return wrapped
        }
    }
}
