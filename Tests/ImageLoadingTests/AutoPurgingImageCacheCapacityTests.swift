import Dispatch
import Foundation
import ImageLoading
import XCTest

/// `AutoPurgingImageCache`'s budgets changed after creation (issue 21: AFNetworking's
/// `memoryCapacity` and `preferredMemoryUsageAfterPurge` are settable).
final class AutoPurgingImageCacheCapacityTests: XCTestCase {
    /// A 10×10 image: 400 bytes.
    private func image(_ value: UInt8 = 1) throws -> Image { try TestImages.image(width: 10, height: 10, value: value) }

    /// A cache holding "a" to "e" (400 bytes each, "a" the oldest), with room for all of them.
    private func filledCache() throws -> AutoPurgingImageCache {
        let cache = AutoPurgingImageCache(memoryCapacity: 4000, preferredMemoryCapacity: 4000)
        for (index, key) in ["a", "b", "c", "d", "e"].enumerated() { cache.add(try image(UInt8(index)), withIdentifier: key) }
        XCTAssertEqual(cache.memoryUsage, 2000)
        return cache
    }

    func testLoweringTheCapacityPurgesAtOnce() throws {
        let cache = try filledCache()
        XCTAssertNotNil(cache.image(withIdentifier: "a"), "read: now the most recently used")
        cache.memoryCapacity = 1000
        XCTAssertEqual(cache.memoryCapacity, 1000)
        XCTAssertEqual(cache.preferredMemoryCapacity, 1000, "the preferred capacity follows it down")
        XCTAssertEqual(cache.memoryUsage, 800, "purged without waiting for the next addition")
        XCTAssertEqual(["a", "b", "c", "d", "e"].map { cache.image(withIdentifier: $0) != nil }, [true, false, false, false, true],
                       "the least recently used went first")
    }

    func testLoweringTheCapacityPurgesDownToThePreferredCapacity() throws {
        let cache = try filledCache()
        cache.setMemoryCapacity(1500, preferredMemoryCapacity: 500)
        XCTAssertEqual(cache.memoryCapacity, 1500)
        XCTAssertEqual(cache.preferredMemoryCapacity, 500)
        XCTAssertEqual(cache.memoryUsage, 400)
        XCTAssertNotNil(cache.image(withIdentifier: "e"))
        XCTAssertEqual(cache.count, 1)
    }

    func testThePreferredCapacityStaysAtOrBelowTheCapacity() throws {
        let cache = try filledCache()
        cache.preferredMemoryCapacity = 10_000
        XCTAssertEqual(cache.preferredMemoryCapacity, 4000, "lowered to the capacity")
        cache.preferredMemoryUsageAfterPurge = 100
        XCTAssertEqual(cache.preferredMemoryCapacity, 100, "AFNetworking's name for the same budget")
        XCTAssertEqual(cache.preferredMemoryUsageAfterPurge, 100)
        XCTAssertEqual(cache.memoryUsage, 2000, "setting the preferred capacity alone does not purge")

        cache.setMemoryCapacity(8000, preferredMemoryCapacity: 6000)
        XCTAssertEqual([cache.memoryCapacity, cache.preferredMemoryCapacity], [8000, 6000], "both raised in one step")
        cache.setMemoryCapacity(3000, preferredMemoryCapacity: nil)
        XCTAssertEqual([cache.memoryCapacity, cache.preferredMemoryCapacity], [3000, 3000], "nil keeps it, lowered to fit")
        cache.setMemoryCapacity(3000, preferredMemoryCapacity: 9000)
        XCTAssertEqual(cache.preferredMemoryCapacity, 3000)
        XCTAssertEqual(cache.memoryUsage, 2000, "under the capacity: nothing purged")
    }

    func testEdgeValues() throws {
        let cache = try filledCache()
        cache.memoryCapacity = 0
        XCTAssertEqual([cache.memoryCapacity, cache.preferredMemoryCapacity, cache.memoryUsage], [0, 0, 0])
        XCTAssertEqual(cache.count, 0, "a capacity of 0 keeps nothing")
        cache.add(try image(), withIdentifier: "x")
        XCTAssertEqual(cache.count, 0, "not even what is added next")
        XCTAssertNil(cache.image(withIdentifier: "x"))

        cache.setMemoryCapacity(.max, preferredMemoryCapacity: .max)
        XCTAssertEqual([cache.memoryCapacity, cache.preferredMemoryCapacity], [.max, .max])
        for index in 0..<20 { cache.add(try image(), withIdentifier: "\(index)") }
        XCTAssertEqual(cache.memoryUsage, 8000, "an unbounded budget never purges")

        cache.memoryCapacity = UInt64(Int.max)
        XCTAssertEqual([cache.memoryCapacity, cache.preferredMemoryCapacity], [UInt64(Int.max), UInt64(Int.max)])
        XCTAssertEqual(cache.count, 20)
        cache.memoryCapacity = 400
        XCTAssertEqual([cache.memoryUsage, UInt64(cache.count)], [400, 1], "from huge to tiny in one step")
    }

    func testChangesRacingAdditionsKeepTheAccountsExact() throws {
        let cache = AutoPurgingImageCache(memoryCapacity: 40_000, preferredMemoryCapacity: 20_000)
        let picture = try image()
        // Two threads add and read while two others move the budgets up and down: whatever
        // the interleaving, the usage is the exact sum of what is stored and within budget.
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for step in 0..<500 {
                switch worker {
                case 0, 1:
                    cache.add(picture, withIdentifier: "\(worker)-\(step % 60)")
                    _ = cache.image(withIdentifier: "\(1 - worker)-\(step % 60)")
                case 2: cache.memoryCapacity = UInt64(400 * (step % 50))
                default: cache.setMemoryCapacity(UInt64(400 * (50 - step % 50)), preferredMemoryCapacity: UInt64(200 * (step % 50)))
                }
            }
        }
        XCTAssertEqual(cache.memoryUsage, UInt64(cache.count) * 400, "usage is the sum of the stored costs")
        XCTAssertLessThanOrEqual(cache.preferredMemoryCapacity, cache.memoryCapacity)
        XCTAssertLessThanOrEqual(cache.memoryUsage, cache.memoryCapacity)
    }
}
