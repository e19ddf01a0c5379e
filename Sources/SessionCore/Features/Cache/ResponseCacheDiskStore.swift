import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A `ResponseCache`'s entries on disk: one file per URL, named by a hash of the key.
///
/// File layout: the magic `CURLEWC1`, the metadata length (4 bytes, little endian), the
/// metadata (JSON: the response without its body, the key, the body's length and FNV-1a
/// checksum), then the body. A file is written under a temporary name and renamed into place,
/// so a reader sees a whole old file or a whole new one; a file whose key, length or checksum
/// does not match (a torn write after a crash, another program's file, a hash collision) is a
/// miss and is removed.
///
/// Not thread-safe: `ResponseCache` holds it under a lock.
struct DiskStore {
    private struct Metadata: Codable {
        var key: String
        var response: CachedResponse
        var bodyLength: Int
        var bodyChecksum: UInt64
    }

    private static let magic = Array("CURLEWC1".utf8)
    private static let fileExtension = "cache"

    let directory: URL
    let capacity: Int
    /// File name → size and last use; loaded from the directory on first use.
    private var index: [String: (size: Int, lastUse: UInt64)]?
    private var clock: UInt64 = 0
    private(set) var usage = 0

    init(directory: URL, capacity: Int) {
        self.directory = directory
        self.capacity = capacity
    }

    /// The bytes on disk (the directory is read on first use).
    mutating func currentUsage() -> Int {
        loadIndexIfNeeded()
        return usage
    }

    mutating func load(key: String) -> CachedResponse? {
        loadIndexIfNeeded()
        let name = Self.fileName(for: key)
        guard index?[name] != nil else { return nil }
        let url = directory.appendingPathComponent(name)
        guard let data = try? Data(contentsOf: url), let metadata = Self.decode(data, key: key) else {
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
        let temporary = directory.appendingPathComponent(".\(name).\(UUID().uuidString).tmp")
        do {
            try file.write(to: temporary)
            // rename(2) replaces atomically: readers see the old file or the new one.
            guard rename(temporary.path, directory.appendingPathComponent(name).path) == 0 else {
                try? FileManager.default.removeItem(at: temporary)
                return
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
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
        unlink(directory.appendingPathComponent(name).path)
        if let old = index?.removeValue(forKey: name) { usage -= old.size }
    }

    private mutating func evict() {
        while usage > capacity, let oldest = index?.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
            remove(name: oldest)
        }
    }

    /// Reads the directory once: sizes, and the modification times as the initial order of use.
    private mutating func loadIndexIfNeeded() {
        guard index == nil else { return }
        var loaded: [String: (size: Int, lastUse: UInt64)] = [:]
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let keys: [URLResourceKey] = [.fileSizeKey, .contentModificationDateKey]
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: keys)) ?? []
        var dated: [(name: String, size: Int, date: Date)] = []
        for file in files {
            let name = file.lastPathComponent
            if name.hasPrefix(".") && name.hasSuffix(".tmp") {
                try? FileManager.default.removeItem(at: file)  // a write a crash interrupted
                continue
            }
            guard file.pathExtension == Self.fileExtension, let values = try? file.resourceValues(forKeys: Set(keys)) else {
                continue
            }
            dated.append((name, values.fileSize ?? 0, values.contentModificationDate ?? .distantPast))
        }
        for entry in dated.sorted(by: { $0.date < $1.date }) {
            clock += 1
            loaded[entry.name] = (entry.size, clock)
            usage += entry.size
        }
        index = loaded
        evict()
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
