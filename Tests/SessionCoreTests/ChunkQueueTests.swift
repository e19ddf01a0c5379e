import Foundation
import XCTest
@testable import SessionCore

/// `ChunkQueue`: the bytes come out in order, whole or copied in pieces of any size, and the
/// count of bytes waiting stays right through both.
final class ChunkQueueTests: XCTestCase {
    func testCopiesAcrossChunksInAnySizeKeepTheOrderAndTheCount() {
        var queue = ChunkQueue()
        var expected: [UInt8] = []
        for number in 0..<300 {  // more than the compaction threshold, chunks of 1 to 7 bytes
            let chunk = Data((0..<(number % 7 + 1)).map { UInt8(truncatingIfNeeded: number &+ $0) })
            queue.append(chunk)
            expected += chunk
        }
        XCTAssertEqual(queue.byteCount, expected.count)
        var out: [UInt8] = []
        var size = 1
        while !queue.isEmpty {
            var buffer = [UInt8](repeating: 0, count: size)
            let copied = buffer.withUnsafeMutableBytes { queue.copy(into: $0) }
            XCTAssertGreaterThan(copied, 0)
            out += buffer.prefix(copied)
            XCTAssertEqual(queue.byteCount, expected.count - out.count)
            size = size % 11 + 1
        }
        XCTAssertEqual(out, expected)
        var buffer = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(buffer.withUnsafeMutableBytes { queue.copy(into: $0) }, 0, "nothing left")
    }

    func testWholeChunksComeOutAfterAPartialCopyWithWhatIsLeft() {
        var queue = ChunkQueue()
        queue.append(Data([1, 2, 3, 4]))
        queue.append(Data([5, 6]))
        var buffer = [UInt8](repeating: 0, count: 3)
        XCTAssertEqual(buffer.withUnsafeMutableBytes { queue.copy(into: $0) }, 3)
        XCTAssertEqual(queue.popChunk().map(Array.init), [4])
        XCTAssertEqual(queue.popChunk().map(Array.init), [5, 6])
        XCTAssertNil(queue.popChunk())
        XCTAssertEqual(queue.byteCount, 0)
        queue.append(Data([7]))
        queue.removeAll()
        XCTAssertTrue(queue.isEmpty)
        XCTAssertEqual(queue.byteCount, 0)
        XCTAssertNil(queue.popChunk())
    }
}
