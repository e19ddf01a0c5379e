import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The one on-disk store of a cache directory in this process: every ``ResponseCache`` given
/// the same directory (the same path once symbolic links above it are resolved) uses it, so its size
/// limit holds for all of them together (two `ImageDownloader`s with their default managers
/// share `~/.cache/curlew/ImageDownloader` this way). A process-wide registry holds the stores
/// weakly: the last cache to let go of a directory closes it.
///
/// The directory is the user's own: created 0700 (each missing component), refused when it is
/// a symbolic link, belongs to another user (who could read the responses or plant answers),
/// is writable by others, or lies below a directory another user controls (owned by them, or
/// writable by others without the sticky bit); narrowed to 0700 when it is only readable by
/// others. It is then used only through a descriptor opened on it, so swapping the path for
/// another directory or a link afterwards changes nothing.
final class SharedDiskStore: Sendable {
    /// The resolved path (the registry's key).
    let path: String
    /// The descriptor every file operation is relative to (openat, renameat, unlinkat).
    private let descriptor: Int32
    /// The entries' bookkeeping; one lock for every cache on this directory. Held only for
    /// the index, renames and removals: entry files are read and written outside it.
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

    /// The store of `directory`, opened (and its directory checked) by the first cache that
    /// asks. A store shared by caches that asked for different capacities keeps the smallest.
    static func open(directory: URL, capacity: Int) -> Result<SharedDiskStore, ResponseCacheError> {
        let requested = directory.standardizedFileURL.path
        return registry.withLock { stores -> Result<SharedDiskStore, ResponseCacheError> in
            stores = stores.filter { $0.value.store != nil }
            // Checked on every open: the path may have been swapped since an earlier one.
            let opened: (path: String, descriptor: Int32)
            switch openChecked(requested) {
            case .failure(let error): return .failure(error)
            case .success(let value): opened = value
            }
            if let existing = stores[opened.path]?.store {
                close(opened.descriptor)
                existing.lowerCapacity(to: capacity)
                return .success(existing)
            }
            let store = SharedDiskStore(path: opened.path, descriptor: opened.descriptor, capacity: capacity)
            stores[opened.path] = WeakStore(store: store)
            return .success(store)
        }
    }

    /// The bytes this store may hold.
    var capacity: Int { store.withLock { $0.capacity } }

    /// Runs `body` on the entries, under the store's lock.
    func withStore<T>(_ body: (inout DiskStore) -> T) -> T {
        store.withLock { body(&$0) }
    }

    /// The entry stored for `key`, if its file is whole. The file is read and its checksum
    /// checked outside the lock, so lookups overlap each other and writes; the lock is taken
    /// only to find the file and to record the use (or remove a bad file).
    func load(key: String) -> CachedResponse? {
        guard let (file, capacity) = store.withLock({ store in store.entryFile(for: key).map { ($0, store.capacity) } })
        else { return nil }
        // The file may be replaced meanwhile: rename(2) makes this read see the old one or the
        // new one, whole.
        let entry = DiskEntryFile.read(file.name, in: descriptor, key: key, sizeLimit: capacity)
        store.withLock { store in
            if entry == nil { store.discard(file.name, version: file.version) } else { store.markUsed(file.name) }
        }
        return entry
    }

    /// Stores `response` for `key`, replacing its entry (or only removing it when it does not
    /// fit the capacity). Encoding and writing the temporary file happen outside the lock; only
    /// renaming it into place and the accounting hold it, so the index and the files agree.
    /// A save that began before a removal of its key (or of everything), or before another
    /// save of the same key, and finishes after it, installs nothing (`DiskStore.install`).
    func save(_ response: CachedResponse, key: String) {
        let (temporary, capacity, ticket) = store.withLock { $0.prepareSave(key: key) }
        guard let encoded = DiskEntryFile.encode(response, key: key), encoded.size <= capacity else {
            store.withLock { store in
                store.remove(key: key)
                store.abandonSave()
            }
            return
        }
        guard DiskEntryFile.create(temporary, with: encoded, in: descriptor) else {
            // The disk is full (or the file could not be made): the entry on disk is the one
            // this save replaces, outdated; left, it answered again once memory forgot the new one.
            unlinkat(descriptor, temporary, 0)
            store.withLock { store in
                store.remove(key: key)
                store.abandonSave()
            }
            return
        }
        store.withLock { $0.install(temporary, size: encoded.size, key: key, ticket: ticket) }
    }

    private func lowerCapacity(to capacity: Int) {
        store.withLock { $0.lowerCapacity(to: capacity) }
    }

    /// Opens the cache directory `path` and checks it, returning its resolved path and a
    /// descriptor on it.
    ///
    /// The parent is reached component by component: a missing one is created 0700, and after
    /// each step the resolved path so far must be trustworthy (`checkTrusted`), so nothing is
    /// created below a directory another user controls. The last component is then looked at
    /// itself, never through a link: a symbolic link is refused whoever made it (whoever did
    /// chose the directory), another user's directory too, and it is opened with `O_NOFOLLOW`
    /// relative to the parent's descriptor. A directory this call created is 0700 already; an
    /// existing one of the user's that others may write to is refused (they could have
    /// planted answers), one they may only read is narrowed to 0700.
    private static func openChecked(_ path: String) -> Result<(path: String, descriptor: Int32), ResponseCacheError> {
        var components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let name = components.popLast(), name != "..", name != "." else { return .failure(.notADirectory(path: path)) }
        var parent = "/"
        if let error = checkTrusted(parent) { return .failure(error) }
        for component in components {
            let candidate = (parent == "/" ? "" : parent) + "/" + component
            if mkdir(candidate, 0o700) != 0, errno != EEXIST { return .failure(unavailable(path)) }
            guard let resolved = resolve(candidate) else { return .failure(unavailable(path)) }
            if let error = checkTrusted(resolved) { return .failure(error) }
            parent = resolved
        }
        let parentDescriptor = Glibc.open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parentDescriptor >= 0 else { return .failure(unavailable(path)) }
        defer { close(parentDescriptor) }
        let resolved = (parent == "/" ? "" : parent) + "/" + name
        let created = mkdirat(parentDescriptor, name, 0o700) == 0
        if !created, errno != EEXIST { return .failure(unavailable(path)) }
        var linkInfo = stat()
        guard fstatat(parentDescriptor, name, &linkInfo, AT_SYMLINK_NOFOLLOW) == 0 else { return .failure(unavailable(path)) }
        if linkInfo.st_mode & S_IFMT == S_IFLNK { return .failure(.directoryIsSymbolicLink(path: path)) }
        let descriptor = openat(parentDescriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            switch errno {
            case ELOOP: return .failure(.directoryIsSymbolicLink(path: path))
            case ENOTDIR: return .failure(.notADirectory(path: path))
            default: return .failure(unavailable(path))
            }
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let error = unavailable(path)
            close(descriptor)
            return .failure(error)
        }
        let failure: ResponseCacheError?
        if info.st_mode & S_IFMT != S_IFDIR {
            failure = .notADirectory(path: path)
        } else if info.st_uid != geteuid() {
            failure = .directoryOwnedByAnotherUser(path: path, owner: info.st_uid)
        } else if info.st_mode & 0o022 != 0 {
            failure = .directoryWritableByOthers(path: path, mode: info.st_mode & 0o7777)
        } else if !created, info.st_mode & 0o077 != 0, fchmod(descriptor, 0o700) != 0 {
            // Only the user's own directory, opened without following a link, is narrowed.
            failure = .permissionsNotRestricted(path: path, reason: String(cString: strerror(errno)))
        } else {
            failure = nil
        }
        if let failure {
            close(descriptor)
            return .failure(failure)
        }
        return .success((resolved, descriptor))
    }

    /// Whether the resolved directory `path` and every directory above it may be trusted not
    /// to change under the cache: each owned by root or this user, and not writable by group
    /// or others unless sticky (like /tmp, where nobody renames another's entries). nil: it
    /// may; else the refusal naming the first that may not.
    private static func checkTrusted(_ path: String) -> ResponseCacheError? {
        var prefixes = ["/"]
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            prefixes.append(prefix)
        }
        for directory in prefixes {
            var info = stat()
            guard lstat(directory, &info) == 0 else { return unavailable(path) }
            guard info.st_mode & S_IFMT == S_IFDIR else { return .notADirectory(path: directory) }
            let owner = info.st_uid
            let writableByOthers = info.st_mode & 0o022 != 0 && info.st_mode & S_ISVTX == 0
            if (owner != 0 && owner != geteuid()) || writableByOthers {
                return .untrustedParentDirectory(path: directory)
            }
        }
        return nil
    }

    /// `path` with every link resolved, or nil.
    private static func resolve(_ path: String) -> String? {
        guard let pointer = realpath(path, nil) else { return nil }
        defer { free(pointer) }
        return String(cString: pointer)
    }

    private static func unavailable(_ path: String) -> ResponseCacheError {
        .directoryUnavailable(path: path, reason: String(cString: strerror(errno)))
    }
}
