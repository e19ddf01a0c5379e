import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The one on-disk store of a cache directory in this process: every ``ResponseCache`` given
/// the same directory (the same path once symbolic links are resolved) uses it, so its size
/// limit holds for all of them together (two `ImageDownloader`s with their default managers
/// share `~/.cache/curlew/ImageDownloader` this way). A process-wide registry holds the stores
/// weakly: the last cache to let go of a directory closes it.
///
/// The directory is the user's own: created 0700 (each missing component), refused when it
/// belongs to another user (who could read the responses or plant answers), narrowed to 0700
/// when it is wider, and then used only through a descriptor opened on it, so swapping the
/// path for another directory or a link afterwards changes nothing.
final class SharedDiskStore: Sendable {
    /// The resolved path (the registry's key).
    let path: String
    /// The descriptor every file operation is relative to (openat, renameat, unlinkat).
    private let descriptor: Int32
    /// The entries; one lock for every cache on this directory.
    private let store: Mutex<DiskStore>

    private struct WeakStore {
        weak var store: SharedDiskStore?
    }

    /// Open stores by resolved path, held weakly.
    private static let registry = Mutex<[String: WeakStore]>([:])

    private init(path: String, descriptor: Int32, capacity: Int) {
        self.path = path
        self.descriptor = descriptor
        store = Mutex(DiskStore(directory: descriptor, capacity: capacity))
    }

    deinit { close(descriptor) }

    /// The store of `directory`, opened (and its directory made safe) by the first cache that
    /// asks. A store shared by caches that asked for different capacities keeps the smallest.
    static func open(directory: URL, capacity: Int) -> Result<SharedDiskStore, ResponseCacheError> {
        let requested = directory.standardizedFileURL.path
        return registry.withLock { stores -> Result<SharedDiskStore, ResponseCacheError> in
            stores = stores.filter { $0.value.store != nil }
            if let error = makeDirectories(requested) { return .failure(error) }
            guard let resolvedPointer = realpath(requested, nil) else {
                return .failure(.directoryUnavailable(path: requested, reason: String(cString: strerror(errno))))
            }
            let resolved = String(cString: resolvedPointer)
            free(resolvedPointer)
            if let existing = stores[resolved]?.store {
                existing.lowerCapacity(to: capacity)
                return .success(existing)
            }
            switch openChecked(resolved) {
            case .failure(let error):
                return .failure(error)
            case .success(let descriptor):
                let store = SharedDiskStore(path: resolved, descriptor: descriptor, capacity: capacity)
                stores[resolved] = WeakStore(store: store)
                return .success(store)
            }
        }
    }

    /// The bytes this store may hold.
    var capacity: Int { store.withLock { $0.capacity } }

    /// Runs `body` on the entries, under the store's lock.
    func withStore<T>(_ body: (inout DiskStore) -> T) -> T {
        store.withLock { body(&$0) }
    }

    private func lowerCapacity(to capacity: Int) {
        store.withLock { $0.lowerCapacity(to: capacity) }
    }

    /// Creates each missing component of `path` with mode 0700 (an existing one is left as
    /// it is: only the cache directory itself is checked and narrowed).
    private static func makeDirectories(_ path: String) -> ResponseCacheError? {
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0, errno != EEXIST {
                return .directoryUnavailable(path: path, reason: String(cString: strerror(errno)))
            }
        }
        return nil
    }

    /// Opens the directory without following a link, and checks it: a directory, owned by
    /// this user, mode 0700 (narrowed when wider).
    private static func openChecked(_ path: String) -> Result<Int32, ResponseCacheError> {
        let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            return .failure(errno == ENOTDIR ? .notADirectory(path: path) : .directoryUnavailable(path: path, reason: reason))
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            return .failure(.directoryUnavailable(path: path, reason: reason))
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            close(descriptor)
            return .failure(.notADirectory(path: path))
        }
        guard info.st_uid == geteuid() else {
            close(descriptor)
            return .failure(.directoryOwnedByAnotherUser(path: path, owner: info.st_uid))
        }
        if info.st_mode & 0o077 != 0, fchmod(descriptor, 0o700) != 0 {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            return .failure(.permissionsNotRestricted(path: path, reason: reason))
        }
        return .success(descriptor)
    }
}
