import Foundation

/// The parsed, reusable form of a policy's certificates: the `X509_STORE` of its trusted
/// roots, the `X509_STORE` of its pins (the anchors in certificate mode) and the SPKI
/// digests of its pins (public-key mode). Built lazily, once, then shared by every copy
/// of the policy and every evaluation.
///
/// `@unchecked Sendable`: the inputs are immutable `let`s; the three lazily built values
/// are guarded by `lock` and, once built, never replaced.
final class PolicyAnchors: @unchecked Sendable {
    private let pinned: Set<Certificate>
    private let roots: Set<Certificate>?
    /// The store a chain the policy's `roots` refuse is verified against next (the system
    /// store, for `SecurityPolicy.fallsBackToSystemRoots`), fetched only then; nil: none.
    let fallback: (@Sendable () -> TrustStore?)?
    private let lock = NSLock()
    private var rootStore: TrustStore?
    private var pinStore: TrustStore?
    private var pinDigests: Set<Data>?

    init(pinned: Set<Certificate>, roots: Set<Certificate>?, fallback: (@Sendable () -> TrustStore?)? = nil) {
        self.pinned = pinned
        self.roots = roots
        // Without roots of its own the policy already uses the system store.
        self.fallback = roots == nil ? nil : fallback
    }

    /// The store that decides chain validity: the system store, or the policy's roots.
    func trustedRoots() -> TrustStore? {
        guard let roots else { return TrustStore.system }
        return lock.withLock {
            if let rootStore { return rootStore }
            rootStore = TrustStore(anchors: roots, origin: "\(roots.count) trusted root certificate(s) of the policy")
            return rootStore
        }
    }

    /// The store whose only anchors are the pinned certificates (certificate pinning).
    func pinnedAnchors() -> TrustStore? {
        lock.withLock {
            if let pinStore { return pinStore }
            pinStore = TrustStore(anchors: pinned, origin: "\(pinned.count) pinned certificate(s)")
            return pinStore
        }
    }

    /// SHA-256 digests of the pinned certificates' SubjectPublicKeyInfo.
    func pinnedKeyDigests() -> Set<Data> {
        lock.withLock {
            if let pinDigests { return pinDigests }
            let digests = Set(pinned.compactMap { $0.handle.subjectPublicKeySHA256() })
            pinDigests = digests
            return digests
        }
    }
}
