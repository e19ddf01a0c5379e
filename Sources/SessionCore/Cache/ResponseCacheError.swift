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
    /// The path's last component is a symbolic link. Whoever made the link chose the
    /// directory the cache would use (and narrow, and evict files from): refused, whatever it
    /// points to. Name the directory itself.
    case directoryIsSymbolicLink(path: String)
    /// A directory above the cache directory (`path`, links resolved) belongs to another user
    /// (not root), or others may write to it without the sticky bit: they could swap the cache
    /// directory for one of their choosing. A world-writable sticky directory such as /tmp is
    /// accepted.
    case untrustedParentDirectory(path: String)
    /// The existing directory is writable by its group or by others (`mode`), who could have
    /// planted answers in it: refused rather than narrowed (a directory only readable by
    /// others is narrowed to 0700).
    case directoryWritableByOthers(path: String, mode: UInt32)

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
        case .directoryIsSymbolicLink(let path):
            return "response cache directory \(path) is a symbolic link: refused"
        case .untrustedParentDirectory(let path):
            return "response cache directory's parent \(path) belongs to another user or is writable by others: refused"
        case .directoryWritableByOthers(let path, let mode):
            return "response cache directory \(path) is writable by others (mode \(String(mode, radix: 8))): refused"
        }
    }
}
