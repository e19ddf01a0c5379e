import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A `ResponseCache`'s entries on disk: one file per URL, named by a hash of the key, in a
/// directory `SharedDiskStore` has opened and checked (0700, this user's); every file
/// operation is relative to that directory's descriptor, and files are created 0600.
///
/// File layout: the magic `CURLEWC2`, the metadata length (4 bytes, little endian), the
/// metadata (JSON: the response without its body, the key, the body's length and FNV-1a
/// checksum), then the body. A file is written under a temporary name and renamed into place,
/// so a reader sees a whole old file or a whole new one; a file whose key, length or checksum
/// does not match (a torn write after a crash, another program's file, a hash collision, an
/// older Curlew's format) is a miss and is removed. Only anonymous entries any manager may
/// reuse are written (`ResponseCache` keeps personal ones, and answers to requests with
/// credentials or cookies, in memory), without `Set-Cookie`: no credential, no digest of one,
/// and keys have no user or password. Only regular files of this user's count as entries.
///
/// Not thread-safe: `SharedDiskStore` holds it under a lock.
struct DiskStore {
    private struct Metadata: Codable {
        var key: String
        var response: CachedResponse
        var bodyLength: Int
        var bodyChecksum: UInt64
    }

    private static let magic = Array("CURLEWC2".utf8)
    private static let fileExtension = "cache"

    /// The directory's descriptor (owned by `SharedDiskStore`).
    let directory: Int32
    private(set) var capacity: Int
    /// File name → size and last use; loaded from the directory on first use.
    private var index: [String: (size: Int, lastUse: UInt64)]?
    private var clock: UInt64 = 0
    private(set) var usage = 0

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

    mutating func load(key: String) -> CachedResponse? {
        loadIndexIfNeeded()
        let name = Self.fileName(for: key)
        guard index?[name] != nil else { return nil }
        guard let data = readFile(name), let metadata = Self.decode(data, key: key) else {
            remove(name: name)
            return nil
        }
        clock += 1
        index?[name]?.lastUse = clock
        return metadata
    }

    mutating func save(_ response: CachedResponse, key: String) {
        loadIndexIfNeeded()
        guard let file = Self.encode(response, key: key), file.count <= capacity else {
            remove(key: key)
            return
        }
        let name = Self.fileName(for: key)
        let temporary = ".\(name).\(UUID().uuidString).tmp"
        // rename(2) replaces atomically: readers see the old file or the new one.
        guard writeFile(temporary, file), renameat(directory, temporary, directory, name) == 0 else {
            unlinkat(directory, temporary, 0)
            return
        }
        if let old = index?[name] { usage -= old.size }
        clock += 1
        index?[name] = (file.count, clock)
        usage += file.count
        evict()
    }

    mutating func remove(key: String) {
        loadIndexIfNeeded()
        remove(name: Self.fileName(for: key))
    }

    mutating func removeAll() {
        loadIndexIfNeeded()
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
        var loaded: [String: (size: Int, lastUse: UInt64)] = [:]
        for entry in dated.sorted(by: { $0.date < $1.date }) {
            clock += 1
            loaded[entry.name] = (entry.size, clock)
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

    /// The whole regular file `name` of this user's, or nil (missing, a link, not a file,
    /// another user's, unreadable).
    private func readFile(_ name: String) -> Data? {
        let file = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_size >= 0
        else { return nil }
        var data = Data(count: Int(info.st_size))
        let complete = data.withUnsafeMutableBytes { raw -> Bool in
            guard let base = raw.baseAddress else { return raw.count == 0 }
            return Self.transferAll(raw.count) { read(file, base + $0, raw.count - $0) }
        }
        return complete ? data : nil
    }

    /// Writes `data` to a new file `name`, readable by the owner only (0600).
    private func writeFile(_ name: String, _ data: Data) -> Bool {
        let file = openat(directory, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard file >= 0 else { return false }
        let written = data.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress else { return true }
            return Self.transferAll(raw.count) { write(file, base + $0, raw.count - $0) }
        }
        return close(file) == 0 && written
    }

    /// Moves `count` bytes with `step` (read(2) or write(2) at the given offset), retrying
    /// after EINTR; false on an error or an early end.
    private static func transferAll(_ count: Int, _ step: (Int) -> Int) -> Bool {
        var offset = 0
        while offset < count {
            let moved = step(offset)
            if moved < 0, errno == EINTR { continue }
            guard moved > 0 else { return false }
            offset += moved
        }
        return true
    }

    private static func fileName(for key: String) -> String {
        let hash = fnv1a(Array(key.utf8))
        return String(hash, radix: 16) + "." + fileExtension
    }

    private static func encode(_ response: CachedResponse, key: String) -> Data? {
        var bodyless = response
        bodyless.body = Data()
        let metadata = Metadata(
            key: key, response: bodyless, bodyLength: response.body.count, bodyChecksum: fnv1a(response.body))
        guard let json = try? JSONEncoder().encode(metadata), json.count < Int(UInt32.max) else { return nil }
        var file = Data(magic)
        withUnsafeBytes(of: UInt32(json.count).littleEndian) { file.append(contentsOf: $0) }
        file.append(json)
        file.append(response.body)
        return file
    }

    private static func decode(_ file: Data, key: String) -> CachedResponse? {
        let header = magic.count + 4
        guard file.count >= header, file.prefix(magic.count).elementsEqual(magic) else { return nil }
        let lengthBytes = file.subdata(in: file.startIndex + magic.count..<file.startIndex + header)
        let length = Int(lengthBytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) })
        guard file.count - header >= length else { return nil }
        let jsonStart = file.startIndex + header
        guard let metadata = try? JSONDecoder().decode(Metadata.self, from: file.subdata(in: jsonStart..<jsonStart + length)),
            metadata.key == key
        else { return nil }
        let body = file.subdata(in: jsonStart + length..<file.endIndex)
        guard body.count == metadata.bodyLength, fnv1a(body) == metadata.bodyChecksum else { return nil }
        var response = metadata.response
        response.body = body
        return response
    }

    /// FNV-1a, 64 bits: detects a torn or altered body (not an adversary: the cache directory
    /// is the user's own).
    private static func fnv1a<Bytes: Sequence>(_ bytes: Bytes) -> UInt64 where Bytes.Element == UInt8 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    private static func fnv1a(_ data: Data) -> UInt64 {
        data.withUnsafeBytes { fnv1a($0) }
    }
}
