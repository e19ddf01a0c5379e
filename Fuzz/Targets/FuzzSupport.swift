// Shared by every fuzz target (compiled into each one; see Fuzz/README.md).

/// Stops the run with `message` when a property the target checks does not hold. libFuzzer
/// reports the trap as a crash and saves the input, like any other crash.
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("fuzz property violated: \(message())") }
}

/// Reads structured values off the front of a fuzz input: the first bytes steer choices, the
/// rest is the payload. Every read is bounded by the bytes that remain.
struct FuzzInput {
    private let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0

    init(_ data: UnsafePointer<UInt8>?, _ size: Int) {
        bytes = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    }

    var remainingCount: Int { bytes.count - offset }
    var isEmpty: Bool { remainingCount == 0 }

    /// The next byte, or 0 when none is left.
    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// The next `count` bytes (fewer when fewer remain).
    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + max(0, count))
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    /// Everything not read yet.
    mutating func rest() -> [UInt8] { take(remainingCount) }

    /// Bytes up to (not including) the next `separator`, which is consumed; the rest when
    /// there is no separator.
    mutating func chunk(until separator: UInt8) -> [UInt8] {
        var end = offset
        while end < bytes.count, bytes[end] != separator { end += 1 }
        let result = Array(bytes[offset..<end])
        offset = min(bytes.count, end + 1)
        return result
    }

    /// `chunk(until:)` decoded as UTF-8 with repair.
    mutating func string(until separator: UInt8) -> String {
        String(decoding: chunk(until: separator), as: UTF8.self)
    }
}
