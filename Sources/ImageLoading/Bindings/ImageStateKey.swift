/// A control state, type-erased so that slots of every conforming type share one table.
struct ImageStateKey: Hashable, @unchecked Sendable {
    // @unchecked: `base` is only ever made from a `Hashable & Sendable` value (the sole init),
    // so what it wraps is Sendable; AnyHashable itself cannot say so.
    let base: AnyHashable

    init<State: Hashable & Sendable>(_ state: State) { base = AnyHashable(state) }
}
