import XCTest
@testable import SessionCore

/// `ByteBuffer`, the response head parser's storage kept by each pooled easy handle.
final class ByteBufferTests: XCTestCase {
    func testAppendsGrowAndKeepEveryByte() {
        let buffer = ByteBuffer(capacity: 16)
        var expected: [UInt8] = []
        for round in 0..<200 {
            let chunk = (0..<(round % 37)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ round) }
            chunk.withUnsafeBytes { buffer.append($0) }
            buffer.append(UInt8(truncatingIfNeeded: round))
            expected += chunk + [UInt8(truncatingIfNeeded: round)]
        }
        XCTAssertEqual(buffer.array, expected)
        buffer.append(UnsafeRawBufferPointer(start: nil, count: 0))  // nothing to copy
        XCTAssertEqual(buffer.count, expected.count)
    }

    func testReplaceLastRewritesOnlyTheTail() {
        let buffer = ByteBuffer()
        Array("name: a\u{1}b".utf8).withUnsafeBytes { buffer.append($0) }
        buffer.replaceLast(3) { $0 < 0x20 ? 0x20 : $0 }
        XCTAssertEqual(String(decoding: buffer.array, as: UTF8.self), "name: a b")
        buffer.replaceLast(1_000) { $0 }  // longer than the buffer: the whole of it, no crash
        XCTAssertEqual(buffer.count, 9)
    }

    /// One huge head must not stay with a pooled handle: emptying returns a grown buffer to
    /// its first size.
    func testEmptyingGivesBackALargeBuffer() {
        let buffer = ByteBuffer(capacity: 512)
        let big = [UInt8](repeating: 0x41, count: 200_000)
        big.withUnsafeBytes { buffer.append($0) }
        XCTAssertGreaterThanOrEqual(buffer.capacity, 200_000)
        buffer.removeAll()
        XCTAssertEqual(buffer.count, 0)
        XCTAssertEqual(buffer.capacity, 512)
        let small = [UInt8](repeating: 0x42, count: 8_000)
        small.withUnsafeBytes { buffer.append($0) }
        buffer.removeAll()
        XCTAssertGreaterThanOrEqual(buffer.capacity, 8_000, "a buffer within the limit is kept")
    }
}
