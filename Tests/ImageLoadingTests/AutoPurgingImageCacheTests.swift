import Foundation
import ImageLoading
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `AutoPurgingImageCache`: exact byte accounting, least-recently-used purging, identifiers.
final class AutoPurgingImageCacheTests: XCTestCase {
    /// A 10×10 image: 400 bytes.
    private func image(_ value: UInt8 = 1) throws -> Image { try TestImages.image(width: 10, height: 10, value: value) }

    func testDefaultsAreAFNetworkingsBudgets() {
        let cache = AutoPurgingImageCache()
        XCTAssertEqual(cache.memoryCapacity, 100 * 1024 * 1024)
        XCTAssertEqual(cache.preferredMemoryCapacity, 60 * 1024 * 1024)
        XCTAssertEqual(cache.memoryUsage, 0)
    }

    func testMemoryUsageIsExact() throws {
        let cache = AutoPurgingImageCache()
        cache.add(try image(), withIdentifier: "a")
        XCTAssertEqual(cache.memoryUsage, 400)
        cache.add(try TestImages.image(width: 3, height: 5), withIdentifier: "b")
        XCTAssertEqual(cache.memoryUsage, 400 + 60)
        // Replacing an image charges the new one only.
        cache.add(try TestImages.image(width: 1, height: 1), withIdentifier: "a")
        XCTAssertEqual(cache.memoryUsage, 4 + 60)
        XCTAssertTrue(cache.removeImage(withIdentifier: "b"))
        XCTAssertEqual(cache.memoryUsage, 4)
        XCTAssertFalse(cache.removeImage(withIdentifier: "b"))
        XCTAssertTrue(cache.removeAllImages())
        XCTAssertEqual(cache.memoryUsage, 0)
        XCTAssertFalse(cache.removeAllImages(), "already empty")
    }

    func testAnAnimationCostsEveryFrame() throws {
        let canvas = [UInt8](repeating: 9, count: 10 * 10 * 4)
        let frames = (0..<3).map { _ in ImageFrame(pixels: canvas, delay: 0.1) }
        let animation = try Image(width: 10, height: 10, pixels: canvas, frames: frames)
        XCTAssertEqual(AutoPurgingImageCache.cost(of: animation), 1200)
        let cache = AutoPurgingImageCache()
        cache.add(animation, withIdentifier: "gif")
        XCTAssertEqual(cache.memoryUsage, 1200)
    }

    func testPurgesLeastRecentlyUsedDownToThePreferredCapacity() throws {
        // Capacity for 5 images, purge down to 2.
        let cache = AutoPurgingImageCache(memoryCapacity: 2000, preferredMemoryCapacity: 800)
        for name in ["a", "b", "c", "d", "e"] { cache.add(try image(), withIdentifier: name) }
        XCTAssertEqual(cache.memoryUsage, 2000, "at capacity: no purge yet")
        // Reading "a" and "c" makes them the most recently used (order now b, d, e, a, c).
        XCTAssertNotNil(cache.image(withIdentifier: "a"))
        XCTAssertNotNil(cache.image(withIdentifier: "c"))
        cache.add(try image(), withIdentifier: "f")  // 2400 > 2000: purge to ≤ 800
        XCTAssertEqual(cache.memoryUsage, 800)
        let kept = ["a", "b", "c", "d", "e", "f"].filter { cache.image(withIdentifier: $0) != nil }
        XCTAssertEqual(kept, ["c", "f"], "the two most recently used survive")
    }

    /// An image costing more than the preferred capacity is kept while there is room, and a
    /// purge drops it first: the others stay (in least-recently-used order the purge dropped
    /// every other image, then the large one too). One costing more than the capacity is not
    /// kept at all, and the image stored under its identifier before goes.
    func testImagesLargerThanThePreferredCapacityGoFirstAndTheOthersStay() throws {
        let cache = AutoPurgingImageCache(memoryCapacity: 1000, preferredMemoryCapacity: 300)
        cache.add(try TestImages.image(width: 2, height: 2), withIdentifier: "small")  // 16
        cache.add(try image(), withIdentifier: "big")  // 400 > 300: room for it
        XCTAssertNotNil(cache.image(withIdentifier: "big"))
        cache.add(try image(), withIdentifier: "big2")  // 816
        cache.add(try TestImages.image(width: 2, height: 2), withIdentifier: "small2")
        cache.add(try image(), withIdentifier: "big3")  // 1232 > 1000: purge to <= 300
        XCTAssertEqual(["small", "small2"].filter { cache.image(withIdentifier: $0) != nil }, ["small", "small2"])
        XCTAssertEqual(cache.memoryUsage, 32)

        cache.add(try TestImages.image(width: 2, height: 2), withIdentifier: "huge")
        cache.add(try TestImages.image(width: 16, height: 16), withIdentifier: "huge")  // 1024 > 1000
        XCTAssertNil(cache.image(withIdentifier: "huge"))
        XCTAssertEqual(cache.memoryUsage, 32)
        XCTAssertEqual(cache.count, 2)
    }

    func testRequestIdentifiersAreTheURLPlusTheAdditionalIdentifier() throws {
        let cache = AutoPurgingImageCache()
        let request = URLRequest(url: try XCTUnwrap(URL(string: "http://example.com/a.png?x=1")))
        cache.add(try image(1), for: request, withAdditionalIdentifier: nil)
        cache.add(try image(2), for: request, withAdditionalIdentifier: "-thumb")
        XCTAssertEqual(cache.image(withIdentifier: "http://example.com/a.png?x=1")?.pixels.first, 1)
        XCTAssertEqual(cache.image(withIdentifier: "http://example.com/a.png?x=1-thumb")?.pixels.first, 2)
        XCTAssertEqual(cache.image(for: request, withAdditionalIdentifier: "-thumb")?.pixels.first, 2)
        XCTAssertTrue(cache.shouldCacheImage(try image(), for: request, withAdditionalIdentifier: nil))
        XCTAssertTrue(cache.removeImage(for: request, withAdditionalIdentifier: nil))
        XCTAssertNil(cache.image(for: request, withAdditionalIdentifier: nil))
        XCTAssertEqual(cache.memoryUsage, 400)
    }

    func testConcurrentUseKeepsTheAccountingExact() throws {
        let cache = AutoPurgingImageCache(memoryCapacity: 40_000, preferredMemoryCapacity: 20_000)
        let picture = try image()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for index in 0..<500 {
                let name = "\(worker)-\(index % 50)"
                cache.add(picture, withIdentifier: name)
                _ = cache.image(withIdentifier: "\(worker)-\((index + 7) % 50)")
                if index % 11 == 0 { cache.removeImage(withIdentifier: name) }
            }
        }
        XCTAssertEqual(cache.memoryUsage, UInt64(cache.count) * 400)
        XCTAssertLessThanOrEqual(cache.memoryUsage, 40_000)
    }
}
