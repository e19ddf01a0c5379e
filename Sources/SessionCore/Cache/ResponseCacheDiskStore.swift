import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A `ResponseCache`'s entries on disk: one file per URL (`DiskEntryFile`), named by a hash of
/// the key, in a directory `SharedDiskStore` has opened and checked (0700, this user's); every
/// file operation is relative to that directory's descriptor, and files are created 0600.
///
/// This is the store's bookkeeping (which files it holds, their sizes, the order of use, the
/// limit); the files themselves are read and written outside its lock (`SharedDiskStore`). A
/// file is written under a temporary name and renamed into place here, under the lock, so a
/// reader sees a whole old file or a whole new one, and the index always counts the file the
/// name holds. A file whose key, length or checksum does not match (a torn write after a
/// crash, another program's file, a hash collision, an older Curlew's format) is a miss and is
/// removed, unless a newer file took its name meanwhile. Only anonymous entries any manager
/// may reuse are written (`ResponseCache` keeps personal ones, and answers to requests with
/// credentials or cookies, in memory), without `Set-Cookie`: no credential, no digest of one,
/// and keys have no user or password. Only regular files of this user's count as entries.
///
/// Not thread-safe: `SharedDiskStore` holds it under a lock.
struct DiskStore {
    private static let fileExtension = "cache"

    /// The directory's descriptor (owned by `SharedDiskStore`).
    let directory: Int32
    private(set) var capacity: Int
    /// File name → size, last use, and the install that put the file there (a reader's
    /// failed check removes the file only if no later install replaced it).
    private var index: [String: (size: Int, lastUse: UInt64, version: UInt64)]?
    private var clock: UInt64 = 0
    private(set) var usage = 0
    /// Saves write their files outside the lock, so a save may finish after a later removal
    /// or a later save of the same key. Each save holds the clock's value when it began (its
    /// ticket); it installs only if nothing newer happened to its name since: no later
    /// install, no `remove(key:)` of it, no `removeAll()` (a cache cleared at log-out must
    /// stay cleared).
    private var removedAt: [String: UInt64] = [:]
    private var allRemovedAt: UInt64 = 0
    /// Saves begun and not yet installed or abandoned; `removedAt` is forgotten when none is.
    private var savesInFlight = 0

    init(directory: Int32, capacity: Int) {
        self.directory = directory
        self.capacity = capacity
    }

    /// The bytes on disk (the directory is read on first use).
    mutating func currentUsage() -> Int {
        loadIndexIfNeeded()
        return usage
    }

    /// Lowers the capacity (a cache asking for less joined the store) and evicts to it.
    mutating func lowerCapacity(to newCapacity: Int) {
        guard newCapacity < capacity else { return }
        capacity = max(0, newCapacity)
        loadIndexIfNeeded()
        evict()
    }

    /// The file to read for `key` and the install it holds, if the store has one.
    mutating func entryFile(for key: String) -> (name: String, version: UInt64)? {
        loadIndexIfNeeded()
        let name = Self.fileName(for: key)
        guard let entry = index?[name] else { return nil }
        return (name, entry.version)
    }

    /// A read of `name` found a whole entry: it is now the most recently used.
    mutating func markUsed(_ name: String) {
        guard index?[name] != nil else { return }
        clock += 1
        index?[name]?.lastUse = clock
    }

    /// A read of `name` found no usable entry: the file is removed, unless another install
    /// replaced it since `version` (that newer file is whole: it was renamed into place).
    mutating func discard(_ name: String, version: UInt64) {
        guard index?[name]?.version == version else { return }
        remove(name: name)
    }

    /// Readies a save of `key`: the directory is listed first (that listing removes leftover
    /// temporary files, so it must not run while this save writes its own), and the name
    /// to write to before `install` renames it into place.
    mutating func prepareSave(key: String) -> (temporary: String, capacity: Int, ticket: UInt64) {
        loadIndexIfNeeded()
        clock += 1
        savesInFlight += 1
        return (".\(Self.fileName(for: key)).\(UUID().uuidString).tmp", capacity, clock)
    }

    /// A save that began with `prepareSave` wrote nothing to install.
    mutating func abandonSave() {
        finishSave()
    }

    private mutating func finishSave() {
        savesInFlight -= 1
        if savesInFlight <= 0 {
            savesInFlight = 0
            removedAt.removeAll(keepingCapacity: true)
        }
    }

    /// Renames the written `temporary` file of `size` bytes into place as `key`'s entry
    /// (rename(2) replaces atomically: readers see the old file or the new one), then evicts.
    /// A file larger than the capacity (lowered meanwhile) is deleted instead, with the old entry.
    mutating func install(_ temporary: String, size: Int, key: String, ticket: UInt64) {
        defer { finishSave() }
        let name = Self.fileName(for: key)
        let superseded = ticket < allRemovedAt || ticket < (removedAt[name] ?? 0) || ticket < (index?[name]?.version ?? 0)
        if superseded {
            unlinkat(directory, temporary, 0)
            return
        }
        guard size <= capacity, renameat(directory, temporary, directory, name) == 0 else {
            // Not installed (too large now, or the rename failed): the entry there is the one
            // this save replaces, outdated either way.
            unlinkat(directory, temporary, 0)
            remove(name: name)
            return
        }
        if let old = index?[name] { usage -= old.size }
        clock += 1
        // The save's ticket is the entry's version: a save begun earlier that finishes later
        // finds a newer version and installs nothing.
        index?[name] = (size, clock, ticket)
        usage += size
        evict()
    }

    mutating func remove(key: String) {
        loadIndexIfNeeded()
        let name = Self.fileName(for: key)
        clock += 1
        if savesInFlight > 0 { removedAt[name] = clock }
        remove(name: name)
    }

    mutating func removeAll() {
        loadIndexIfNeeded()
        clock += 1
        allRemovedAt = clock
        for name in index?.keys.map({ $0 }) ?? [] { remove(name: name) }
    }

    private mutating func remove(name: String) {
        unlinkat(directory, name, 0)
        if let old = index?.removeValue(forKey: name) { usage -= old.size }
    }

    private mutating func evict() {
        while usage > capacity, let oldest = index?.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
            remove(name: oldest)
        }
    }

    /// Reads the directory once: sizes, and the modification times as the initial order of
    /// use, of the store's own files (`ownFileInfo`).
    private mutating func loadIndexIfNeeded() {
        guard index == nil else { return }
        var dated: [(name: String, size: Int, date: Int)] = []
        let listing = dup(directory)
        if listing >= 0, let stream = fdopendir(listing) {
            rewinddir(stream)  // the duplicate shares its offset with earlier listings
            while let entry = readdir(stream) {
                // Read the name where it lies, up to its NUL: glibc allocates each entry only as
                // long as its name (`d_reclen`), so copying the whole 256-byte `d_name` array
                // can read past the end of readdir's buffer (AddressSanitizer saw it on the last
                // entry of a full buffer).
                guard let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) else { continue }
                let name = String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self))
                if name.hasPrefix(".") && name.hasSuffix(".tmp") {
                    unlinkat(directory, name, 0)  // a write a crash interrupted
                    continue
                }
                guard name.hasSuffix("." + Self.fileExtension), let info = ownFileInfo(name) else { continue }
                dated.append((name, Int(info.st_size), Int(info.st_mtim.tv_sec)))
            }
            closedir(stream)
        } else if listing >= 0 {
            close(listing)
        }
        var loaded: [String: (size: Int, lastUse: UInt64, version: UInt64)] = [:]
        for entry in dated.sorted(by: { $0.date < $1.date }) {
            clock += 1
            loaded[entry.name] = (entry.size, clock, clock)
            usage += entry.size
        }
        index = loaded
        evict()
    }

    /// The status of `name` when it is one of the store's own files: a regular file of this
    /// user's, looked at through a descriptor opened without following a link (so what is
    /// checked is what is narrowed: `fchmodat` would follow a link swapped in after a check).
    /// A file an older Curlew left readable by others is narrowed to 0600. nil for anything
    /// else (a link, a FIFO, another user's file): never counted, read, narrowed or evicted.
    private func ownFileInfo(_ name: String) -> stat? {
        // O_NONBLOCK: a FIFO named like an entry must not block the listing.
        let file = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { return nil }
        if info.st_mode & 0o077 != 0 { fchmod(file, 0o600) }
        return info
    }

    /// The entry file's name: FNV-1a (64 bits) of the key, in hexadecimal. The same name as
    /// older formats used, so a new entry replaces an old file rather than leaving it behind.
    static func fileName(for key: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16) + "." + fileExtension
    }
}
