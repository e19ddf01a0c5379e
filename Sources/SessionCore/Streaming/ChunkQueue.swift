import Foundation

/// Body chunks in arrival order, taken whole or copied out in pieces: the buffer between a
/// producer and a consumer of a body (`ResponseStreamBuffer`, `AsyncBodyFeed`, `BodyPump`).
/// Not thread-safe: each owner keeps it under its own lock.
///
/// A taken chunk is released at once, and the array is compacted when half of it is spent,
/// so taking is amortised O(1) per chunk however small the chunks are (`removeFirst()` per
/// chunk is O(n) in the chunks still waiting).
struct ChunkQueue {
    /// Live chunks are `chunks[first...]`.
    private var chunks: [Data] = []
    private var first = 0
    /// Bytes of `chunks[first]` already copied out.
    private var headOffset = 0
    /// Bytes not yet taken.
    private(set) var byteCount = 0

    /// Whether no chunk is waiting.
    var isEmpty: Bool { first == chunks.count }

    mutating func append(_ chunk: Data) {
        chunks.append(chunk)
        byteCount += chunk.count
    }

    /// The next chunk, whole (what is left of it, if a copy had begun it).
    mutating func popChunk() -> Data? {
        guard first < chunks.count else { return nil }
        var chunk = chunks[first]
        if headOffset > 0 { chunk = chunk.dropFirst(headOffset) }
        releaseHead()
        byteCount -= chunk.count
        return chunk
    }

    /// Copies up to `buffer.count` bytes into `buffer`, oldest first; returns how many.
    mutating func copy(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var copied = 0
        while copied < buffer.count, first < chunks.count {
            let head = chunks[first]
            let count = min(buffer.count - copied, head.count - headOffset)
            head.withUnsafeBytes { bytes in
                if let from = bytes.baseAddress {
                    (base + copied).copyMemory(from: from + headOffset, byteCount: count)
                }
            }
            copied += count
            headOffset += count
            if headOffset == head.count { releaseHead() }
        }
        byteCount -= copied
        return copied
    }

    /// Drops every chunk.
    mutating func removeAll() {
        chunks.removeAll()
        first = 0
        headOffset = 0
        byteCount = 0
    }

    /// Releases `chunks[first]` and moves past it, compacting the spent prefix.
    private mutating func releaseHead() {
        chunks[first] = Data()
        first += 1
        headOffset = 0
        if first == chunks.count {
            chunks.removeAll(keepingCapacity: true)
            first = 0
        } else if first >= 64 && first * 2 > chunks.count {
            chunks.removeFirst(first)
            first = 0
        }
    }
}
