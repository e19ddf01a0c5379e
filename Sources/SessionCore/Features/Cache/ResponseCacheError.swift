import Foundation

/// Why a ``ResponseCache`` keeps nothing on disk (``ResponseCache/diskStoreError``): its
/// directory could not be made safe. The cache then works in memory only.
public enum ResponseCacheError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The directory could not be created, resolved or opened (`reason`: the system's words).
    case directoryUnavailable(path: String, reason: String)
    /// Something other than a directory is at the path.
    case notADirectory(path: String)
    /// The directory belongs to another user (`owner`: its uid), who could read the cached
    /// responses or plant answers in it; Curlew refuses it rather than trusting it.
    case directoryOwnedByAnotherUser(path: String, owner: UInt32)
    /// The directory's permissions could not be narrowed to its owner (0700).
    case permissionsNotRestricted(path: String, reason: String)

    /// A sentence naming the directory and the reason.
    public var description: String {
        switch self {
        case .directoryUnavailable(let path, let reason):
            return "response cache directory \(path) is unavailable: \(reason)"
        case .notADirectory(let path):
            return "response cache directory \(path) is not a directory"
        case .directoryOwnedByAnotherUser(let path, let owner):
            return "response cache directory \(path) belongs to uid \(owner), not to this user: refused"
        case .permissionsNotRestricted(let path, let reason):
            return "response cache directory \(path) could not be made private (0700): \(reason)"
        }
    }
}
