import Foundation

/// The 64-bit checksum of a disk-cache entry's body: detects a torn or altered body (not an
/// adversary: the cache directory is the user's own).
///
/// It reads eight bytes per step (unaligned little-endian loads) into four independent lanes,
/// so the multiplications of one 32-byte block do not wait on each other; the byte-at-a-time
/// FNV-1a it replaced was one dependent multiply per byte (6.5% of the disk-cache pass's CPU).
///
/// Every step is a bijection of the lane and of the word it takes in (an odd multiplier, an
/// addition, a rotation), and the lanes are merged by a sum of rotations and a bijective
/// finish: two bodies of the same length that differ in a single 8-byte word never have the
/// same checksum, so one flipped byte or bit is always caught. The length is mixed in (and the
/// store compares it too), so a cut-short body is caught at any length.
enum CacheChecksum {
    private static let seed: UInt64 = 0x6a09_e667_f3bc_c908  // √2's fraction: any fixed value
    private static let multiplier: UInt64 = 0x9e37_79b9_7f4a_7c15  // odd: multiplying is invertible
    private static let stepMultiplier: UInt64 = 0xd6e8_feb8_6659_fd93  // odd

    /// The checksum of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let count = bytes.count
        var offset = 0
        var lanes = (seed, seed &+ multiplier, seed ^ stepMultiplier, seed &- multiplier)
        if count >= 32 {
            // Four lanes, each fed one word of every 32-byte block.
            while offset + 32 <= count {
                lanes.0 = step(lanes.0, word(bytes, offset))
                lanes.1 = step(lanes.1, word(bytes, offset + 8))
                lanes.2 = step(lanes.2, word(bytes, offset + 16))
                lanes.3 = step(lanes.3, word(bytes, offset + 24))
                offset += 32
            }
        }
        // A sum of the lanes rotated apart: for fixed other lanes, a bijection of each.
        var hash = rotate(lanes.0, 1) &+ rotate(lanes.1, 7) &+ rotate(lanes.2, 12) &+ rotate(lanes.3, 18)
        hash = step(hash, UInt64(count))
        while offset + 8 <= count {
            hash = step(hash, word(bytes, offset))
            offset += 8
        }
        if offset < count {
            // The last 1-7 bytes, zero-padded (the length above tells the padding apart).
            var tail: UInt64 = 0
            for index in 0..<(count - offset) {
                tail |= UInt64(bytes[offset + index]) << (8 * UInt64(index))
            }
            hash = step(hash, tail)
        }
        // Spreads every bit over the whole value; each line is invertible.
        hash ^= hash >> 31
        hash = hash &* multiplier
        hash ^= hash >> 29
        hash = hash &* stepMultiplier
        hash ^= hash >> 32
        return hash
    }

    /// One word into one lane: a bijection of `lane` for a fixed word, and of `word` for a
    /// fixed lane.
    @inline(__always)
    private static func step(_ lane: UInt64, _ word: UInt64) -> UInt64 {
        rotate(lane &+ word &* stepMultiplier, 31) &* multiplier
    }

    @inline(__always)
    private static func rotate(_ value: UInt64, _ bits: UInt64) -> UInt64 {
        (value << bits) | (value >> (64 - bits))
    }

    @inline(__always)
    private static func word(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}

extension CacheChecksum {
    /// The checksum of `data`'s bytes.
    static func checksum(_ data: Data) -> UInt64 {
        data.withUnsafeBytes { checksum($0) }
    }
}
