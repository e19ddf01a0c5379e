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
}
