import Foundation
import ImageLoading
import XCTest

final class ImageResamplingTests: XCTestCase {
    func testScaledToFitKeepsTheAspectRatioAndAveragesAreas() throws {
        // 4 × 2: left half black, right half white, all opaque.
        let black: [UInt8] = [0, 0, 0, 255], white: [UInt8] = [255, 255, 255, 255]
        let row = black + black + white + white
        let image = try Image(width: 4, height: 2, pixels: row + row, scale: 2)
        let half = image.scaled(toFit: (width: 2, height: 10))
        XCTAssertEqual(half.width, 2)
        XCTAssertEqual(half.height, 1)
        XCTAssertEqual(half.scale, 2)
        XCTAssertEqual(half.pixels, black + white)
        let single = image.scaled(toFit: (width: 1, height: 1))
        XCTAssertEqual(single.width, 1)
        XCTAssertEqual(single.height, 1, "the aspect ratio rounds to at least one pixel")
        assertColor(single.pixels, [128, 128, 128, 255], tolerance: 1)
        XCTAssertEqual(image.scaled(toFit: (width: 100, height: 100)), image, "never enlarged")
        XCTAssertEqual(image.scaled(toFit: (width: 0, height: -3)).width, 1, "sizes below 1 count as 1")
    }

    func testTransparentPixelsLendNoColour() throws {
        // An opaque red pixel next to a transparent green one averages to half-transparent red.
        let image = try Image(width: 2, height: 1, pixels: [255, 0, 0, 255, 0, 255, 0, 0])
        let scaled = image.scaled(toFit: (width: 1, height: 1))
        assertColor(scaled.pixels, [255, 0, 0, 128], tolerance: 1)
    }

    func testFramesAreScaledToo() throws {
        let red = [UInt8](repeating: 0, count: 16).enumerated().map { $0.offset % 4 == 0 || $0.offset % 4 == 3 ? 255 : 0 }
            .map(UInt8.init)
        let blue = red.enumerated().map { $0.offset % 4 == 0 ? 0 : ($0.offset % 4 == 2 ? 255 : $0.element) }
        let image = try Image(width: 2, height: 2, pixels: red,
                              frames: [ImageFrame(pixels: red, delay: 0.1), ImageFrame(pixels: blue, delay: 0.2)])
        let scaled = image.scaled(toFit: (width: 1, height: 1))
        XCTAssertEqual(scaled.frames.count, 2)
        XCTAssertEqual(scaled.frames.map(\.delay), [0.1, 0.2])
        XCTAssertEqual(scaled.pixels, [255, 0, 0, 255])
        XCTAssertEqual(scaled.frames[1].pixels, [0, 0, 255, 255])
    }

    func testDecodingWithAMaximumSizeDownsamplesEveryFormat() throws {
        let files = try PillowFixtures.make("""
            im = Image.new('RGB', (300, 200), (250, 250, 250))
            for name, options in [('a.png', {}), ('a.gif', {}), ('a.webp', {'lossless': True})]:
                save(name, im, **options)
            """)
        for (name, data) in files {
            let image = try Image(data: data, options: .init(maximumPixelSize: 75))
            XCTAssertEqual(image.width, 75, name)
            XCTAssertEqual(image.height, 50, name)
            assertColor(image.rgba(30, 20), [250, 250, 250, 255], tolerance: 2, name)
        }
    }
}
