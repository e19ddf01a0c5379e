/// A growable byte buffer that appends with one `memcpy`, kept across transfers by its owner.
///
/// `Array<UInt8>.append(contentsOf:)` from a raw buffer costs a few hundred instructions a
/// call (uniqueness check, generic copy), which the header callback paid on every line of
/// every response. Not `Sendable`: owned by one object on one thread (the response head
/// parser, on the driver thread).
final class ByteBuffer {
    private var base: UnsafeMutableRawPointer
    private(set) var capacity: Int
    /// The bytes written so far.
    private(set) var count = 0

    private let initialCapacity: Int

    init(capacity: Int = 512) {
        initialCapacity = max(16, capacity)
        self.capacity = initialCapacity
        base = .allocate(byteCount: initialCapacity, alignment: 1)
    }

    deinit { base.deallocate() }

    /// The bytes written so far (valid until the next change).
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// A copy of the bytes as an array.
    var array: [UInt8] { [UInt8](bytes) }

    @inline(__always)
    func append(_ source: UnsafeRawBufferPointer) {
        guard let from = source.baseAddress, !source.isEmpty else { return }
        reserve(count + source.count)
        (base + count).copyMemory(from: from, byteCount: source.count)
        count += source.count
    }

    func append(_ byte: UInt8) {
        reserve(count + 1)
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    /// Appends `value` in the machine's byte order (bookkeeping, such as offsets: not bytes for
    /// the wire).
    func append(int32 value: Int32) {
        reserve(count + 4)
        base.storeBytes(of: value, toByteOffset: count, as: Int32.self)
        count += 4
    }

    /// Appends three `Int32` values with one capacity check (a header field's offsets).
    @inline(__always)
    func append(int32 first: Int32, _ second: Int32, _ third: Int32) {
        reserve(count + 12)
        base.storeBytes(of: first, toByteOffset: count, as: Int32.self)
        base.storeBytes(of: second, toByteOffset: count + 4, as: Int32.self)
        base.storeBytes(of: third, toByteOffset: count + 8, as: Int32.self)
        count += 12
    }

    /// The `Int32` that `append(int32:)` wrote at `offset`.
    func int32(at offset: Int) -> Int32 {
        precondition(offset >= 0 && offset + 4 <= count, "offset outside the buffer")
        return base.loadUnaligned(fromByteOffset: offset, as: Int32.self)
    }

    /// Overwrites the `Int32` at `offset`.
    func setInt32(_ value: Int32, at offset: Int) {
        precondition(offset >= 0 && offset + 4 <= count, "offset outside the buffer")
        base.storeBytes(of: value, toByteOffset: offset, as: Int32.self)
    }

    /// Rewrites the last `length` bytes in place through `transform`.
    func replaceLast(_ length: Int, _ transform: (UInt8) -> UInt8) {
        let start = count - min(length, count)
        for offset in start..<count {
            let byte = base.load(fromByteOffset: offset, as: UInt8.self)
            base.storeBytes(of: transform(byte), toByteOffset: offset, as: UInt8.self)
        }
    }

    /// Empties the buffer, keeping its memory up to `keepingCapacity` bytes (a larger buffer
    /// goes back to its first size: one huge head must not stay with a pooled handle).
    func removeAll(keepingCapacity limit: Int = 16 << 10) {
        count = 0
        guard capacity > limit else { return }
        base.deallocate()
        capacity = initialCapacity
        base = .allocate(byteCount: capacity, alignment: 1)
    }

    /// Makes room for `needed` bytes in all; the check is inlined into every append, the
    /// growth is not.
    @inline(__always)
    private func reserve(_ needed: Int) {
        if needed > capacity { grow(to: needed) }
    }

    @inline(never)
    private func grow(to needed: Int) {
        var grown = capacity
        while grown < needed { grown = grown > Int.max / 2 ? needed : grown * 2 }
        let bigger = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 1)
        bigger.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = bigger
        capacity = grown
    }
}
