import Foundation
import Serialization
import Synchronization

/// The `userInfo` of `.taskDidComplete`: the `SessionNotificationKey` entries that apply to
/// one task.
///
/// The notification is posted for every task, whether anyone observes it or not, so building
/// its dictionary must cost little. Key by key it cost about 7k instructions per task, a fifth
/// of the completion queue's work on a small GET: new storage with its own hash seed, then a
/// `String` hash and a probe per key. Instead, one template per set of keys holds the keys with
/// placeholder values. A copy of a template has the template's seed and layout, so each value
/// is written through the template's own index, with no hashing.
enum CompletionUserInfo {
    /// The dictionary for a task that ended with `result`: the raw body, the serializer's value
    /// or the error, the serializer (when `serializerRan`), the metrics and a download's file,
    /// where present.
    static func make(
        body: Data?, result: Result<any Sendable, any Error>, serializer: any ResponseSerialization,
        serializerRan: Bool, metrics: TaskMetrics?, fileURL: URL?
    ) -> [AnyHashable: Any] {
        // The mask from presence alone: testing an existential for nil through a copy cost more
        // than the rest of this function.
        let succeeded: Bool
        if case .success = result { succeeded = true } else { succeeded = false }
        let keyMask = (body != nil ? 1 : 0) | (succeeded ? 2 : 8) | (serializerRan ? 4 : 0)
            | (metrics != nil ? 16 : 0) | (fileURL != nil ? 32 : 0)
        let template = templates[keyMask]
        var info = template.dictionary
        // Each index is the template's, valid in its copy: same storage layout, no hashing.
        if let body, let index = template.indices[0] { info.values[index] = body }
        switch result {
        case .success(let value): if let index = template.indices[1] { info.values[index] = value }
        case .failure(let error): if let index = template.indices[3] { info.values[index] = error }
        }
        if serializerRan, let index = template.indices[2] { info.values[index] = serializer }
        if let metrics, let index = template.indices[4] { info.values[index] = metrics }
        if let fileURL, let index = template.indices[5] { info.values[index] = fileURL }
        return info
    }

    /// One template per set of keys, each made the first time a task needs it.
    private static let templates = TemplateTable()

    /// The 64 possible templates, each made on first use and kept: making all 64 at the first
    /// completion cost ~2.7M instructions (callgrind), a tenth of a one-request process (the
    /// command-line tool), where a process uses one or two of them.
    ///
    /// Behind a lock rather than in an `AtomicLazyReference` per slot: that generic type is
    /// not specialised in this module, so each `load()` went through the Synchronization
    /// library's unspecialised code and `Unmanaged`'s metadata accessor, ~645 instructions
    /// per completion; an uncontended lock and an array read cost about a tenth of that.
    ///
    /// `Sendable`: the array is only reached under its `Mutex`.
    final class TemplateTable: Sendable {
        private let made = Mutex<[Template?]>(Array(repeating: nil, count: 64))

        /// The template for `keyMask` (0..<64), made now if no task needed it before. Threads
        /// asking at once wait for the one that makes it, and all return that one.
        subscript(keyMask: Int) -> Template {
            made.withLock { made in
                if let template = made[keyMask] { return template }
                let template = Template(keyMask: keyMask)
                made[keyMask] = template
                return template
            }
        }

        /// How many templates were made so far.
        var madeCount: Int { made.withLock { $0.reduce(0) { $0 + ($1 == nil ? 0 : 1) } } }
    }

    /// The keys of one set with placeholder values, and where each key sits.
    ///
    /// `@unchecked Sendable`: immutable after `init`. Its dictionary is only ever copied,
    /// never changed in place, and holds `String` keys and `()` values.
    final class Template: @unchecked Sendable {
        /// The keys in bit order (read only while the templates are made).
        static var keys: [AnyHashable] {
            [
                NotificationKeys.responseData, NotificationKeys.serializedResponse, NotificationKeys.responseSerializer,
                NotificationKeys.error, NotificationKeys.metrics, NotificationKeys.assetPath,
            ]
        }

        let dictionary: [AnyHashable: Any]
        /// Per key of `keys`, its index in `dictionary` (nil: not in this set).
        let indices: [Dictionary<AnyHashable, Any>.Index?]

        init(keyMask: Int) {
            var dictionary: [AnyHashable: Any] = [:]
            let keys = Self.keys
            for (bit, key) in keys.enumerated() where keyMask & (1 << bit) != 0 {
                dictionary[key] = ()
            }
            self.dictionary = dictionary
            indices = keys.map { dictionary.index(forKey: $0) }
        }
    }
}
