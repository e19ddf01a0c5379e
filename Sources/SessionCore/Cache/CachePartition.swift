import Foundation
import Synchronization

/// A manager's private-cache partition: the token its personal cache entries carry (see
/// ``ResponseCache``). A reset session (`invalidateSessionCancelingTasks(_:resetSession: true)`,
/// the logout path) takes a new token, so the previous user's personal entries are never
/// answered again; they are also removed.
final class CachePartition: Sendable {
    private let token = Mutex(UUID())

    /// The token entries stored now are tagged with.
    var current: UUID { token.withLock { $0 } }

    /// Replaces the token; returns the one it replaced.
    func renew() -> UUID {
        token.withLock { token in
            defer { token = UUID() }
            return token
        }
    }
}

/// Where a response may be kept, by RFC 9111's rules for shared and private caches.
enum CacheScope: Equatable {
    /// Any manager using the cache may reuse it (still only for the same identity); it may go
    /// to disk.
    case shared
    /// Only the manager that stored it, until its session is reset; memory only.
    case personal

    /// The scope of a response, or nil when the cache must not store it.
    ///
    /// A `private` response, or one to an authorized request that no `public`, `s-maxage` or
    /// `must-revalidate` lets a shared cache keep (RFC 9111 §3.5, §5.2.2.7), is personal: a
    /// cache used by one manager alone keeps it (it is that manager's private cache), a cache
    /// several managers use (a shared cache) does not.
    static func of(responseDirectives directives: [String: String], authorized: Bool, cacheIsShared: Bool) -> CacheScope? {
        let sharable = directives["public"] != nil || directives["s-maxage"] != nil || directives["must-revalidate"] != nil
        let personal = directives["private"] != nil || (authorized && !sharable)
        guard personal else { return .shared }
        return cacheIsShared ? nil : .personal
    }
}
