import ImageLoading
import XCTest

final class ImageTests: XCTestCase {
    func testPixelBufferMustMatchTheDimensions() throws {
        let image = try Image(width: 2, height: 3, pixels: [UInt8](repeating: 255, count: 24), scale: 2)
        XCTAssertEqual(image.memoryCost, 24)
        XCTAssertEqual(image.size.width, 1)
        XCTAssertEqual(image.size.height, 1.5)
        XCTAssertFalse(image.isAnimated)
        XCTAssertThrowsError(try Image(width: 2, height: 3, pixels: [UInt8](repeating: 0, count: 23)))
        XCTAssertThrowsError(try Image(width: 0, height: 3, pixels: []))
        XCTAssertThrowsError(try Image(width: 1, height: 1, pixels: [0, 0, 0, 0], scale: .infinity))
        XCTAssertThrowsError(try Image(width: 1, height: 1, pixels: [0, 0, 0, 0], scale: 0))
        XCTAssertThrowsError(try Image(width: Int.max, height: 2, pixels: []))
    }

    func testMemoryCostCountsEveryFrame() throws {
        let canvas = [UInt8](repeating: 9, count: 10 * 10 * 4)
        let frames = (0..<3).map { _ in ImageFrame(pixels: canvas, delay: 0.1) }
        let animation = try Image(width: 10, height: 10, pixels: canvas, frames: frames)
        XCTAssertEqual(animation.memoryCost, 1200, "three canvases of 400 bytes")
        XCTAssertEqual(AutoPurgingImageCache.cost(of: animation), animation.memoryCost, "what the cache charges")
    }

    func testPropertiesSetToDisagreeNeverTrap() throws {
        let valid = try Image(width: 2, height: 2, pixels: [UInt8](repeating: 1, count: 16))
        var huge = valid
        huge.width = Int.max
        huge.height = Int.max
        XCTAssertEqual(huge.memoryCost, UInt64.max, "saturates instead of overflowing")
        assertImageError(.invalidPixelBuffer, try huge.pngData())
        XCTAssertEqual(huge.scaled(toFit: (width: 1, height: 1)), huge, "nothing consistent to resample")

        var negative = valid
        negative.width = -5
        XCTAssertEqual(negative.memoryCost, 0)
        assertImageError(.invalidPixelBuffer, try negative.pngData())
        XCTAssertEqual(negative.scaled(toFit: (width: 1, height: 1)), negative)

        var wider = valid
        wider.width = 3  // 3 × 2 × 4 = 24 bytes expected, 16 held
        XCTAssertEqual(wider.memoryCost, 24)
        assertImageError(.invalidPixelBuffer, try wider.pngData())
        XCTAssertEqual(wider.scaled(toFit: (width: 1, height: 1)), wider)

        var shortFrame = valid
        shortFrame.frames = [ImageFrame(pixels: valid.pixels, delay: 0.1), ImageFrame(pixels: [0, 0, 0, 0], delay: 0.1)]
        XCTAssertEqual(shortFrame.memoryCost, 32)
        XCTAssertEqual(shortFrame.scaled(toFit: (width: 1, height: 1)), shortFrame, "a frame of the wrong size")
        XCTAssertEqual(valid.scaled(toFit: (width: 1, height: 1)).width, 1, "a consistent image is still scaled")
        XCTAssertNoThrow(try valid.pngData())
    }
}
