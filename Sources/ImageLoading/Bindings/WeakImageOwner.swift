/// A weak reference to a displaying object, with its identity remembered (to find its table
/// entry after it is gone).
final class WeakImageOwner: @unchecked Sendable {
    // @unchecked: `key` is immutable; `object` is a weak reference whose loads and stores the
    // Swift runtime makes atomic.
    let key: ObjectIdentifier
    weak var object: AnyObject?

    init(_ object: AnyObject) {
        key = ObjectIdentifier(object)
        self.object = object
    }
}
