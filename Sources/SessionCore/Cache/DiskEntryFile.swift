import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One disk-cache entry's file: its format, and reading and writing it relative to the cache
/// directory's descriptor. Stateless, so `SharedDiskStore` runs it outside its lock: reads
/// overlap each other and the writes of new entries.
///
/// Layout: the magic `CURLEWC3`, the metadata length (4 bytes, little endian), the metadata
/// (JSON: the response without its body, the key, the body's length and `CacheChecksum`), then
/// the body. Files of an older format (`CURLEWC2`, whose metadata held an FNV-1a
/// `bodyChecksum`) fail the magic and are misses: never verified with the wrong checksum.
enum DiskEntryFile {
    private struct Metadata: Codable {
        var key: String
        var response: CachedResponse
        var bodyLength: Int
        /// `CacheChecksum` of the body (named apart from the older format's `bodyChecksum`).
        var bodyChecksum64: UInt64
    }

    static let magic = Array("CURLEWC3".utf8)
    private static var headerLength: Int { magic.count + 4 }

    /// An entry ready to be written: the header and metadata, and the body (kept apart so the
    /// body is never copied into one buffer with them).
    struct Encoded {
        var head: Data
        var body: Data
        var size: Int { head.count + body.count }
    }

    /// `response` as a file's contents for `key`; nil if its metadata cannot be encoded.
    static func encode(_ response: CachedResponse, key: String) -> Encoded? {
        var bodyless = response
        bodyless.body = Data()
        let metadata = Metadata(
            key: key, response: bodyless, bodyLength: response.body.count,
            bodyChecksum64: CacheChecksum.checksum(response.body))
        guard let json = try? JSONEncoder().encode(metadata), json.count < Int(UInt32.max) else { return nil }
        var head = Data(magic)
        withUnsafeBytes(of: UInt32(json.count).littleEndian) { head.append(contentsOf: $0) }
        head.append(json)
        return Encoded(head: head, body: response.body)
    }

    /// The entry in the regular file `name` of this user's if it is whole and for `key`; nil
    /// for anything else (missing, a link, not a regular file, another user's, larger than
    /// `sizeLimit`, another format or key, a body whose length or checksum does not match).
    static func read(_ name: String, in directory: Int32, key: String, sizeLimit: Int) -> CachedResponse? {
        let file = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { return nil }
        let size = Int(info.st_size)
        guard size >= headerLength, size <= sizeLimit, let header = readBytes(file, at: 0, count: headerLength),
            header.prefix(magic.count).elementsEqual(magic)
        else { return nil }
        let metadataLength = header.withUnsafeBytes {
            Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: magic.count, as: UInt32.self)))
        }
        guard metadataLength <= size - headerLength,
            let json = readBytes(file, at: headerLength, count: metadataLength),
            let metadata = try? JSONDecoder().decode(Metadata.self, from: json), metadata.key == key,
            metadata.bodyLength == size - headerLength - metadataLength,
            // Read straight into the body's own buffer: no copy out of a whole-file buffer.
            let body = readBytes(file, at: headerLength + metadataLength, count: metadata.bodyLength),
            CacheChecksum.checksum(body) == metadata.bodyChecksum64
        else { return nil }
        var response = metadata.response
        response.body = body
        return response
    }

    /// Writes `entry` to a new file `name` in `directory`, readable by the owner only (0600).
    static func create(_ name: String, with entry: Encoded, in directory: Int32) -> Bool {
        let file = openat(directory, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard file >= 0 else { return false }
        let written = writeAll(file, entry.head) && writeAll(file, entry.body)
        return close(file) == 0 && written
    }

    /// `count` bytes of `file` from `offset`, or nil on an error or an early end.
    private static func readBytes(_ file: Int32, at offset: Int, count: Int) -> Data? {
        var data = Data(count: count)
        let complete = data.withUnsafeMutableBytes { raw -> Bool in
            guard let base = raw.baseAddress else { return raw.count == 0 }
            return transferAll(raw.count) { pread(file, base + $0, raw.count - $0, off_t(offset + $0)) }
        }
        return complete ? data : nil
    }

    private static func writeAll(_ file: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress else { return true }
            return transferAll(raw.count) { write(file, base + $0, raw.count - $0) }
        }
    }

    /// Moves `count` bytes with `step` (a read or write at the given offset), retrying after
    /// EINTR; false on an error or an early end.
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
}
