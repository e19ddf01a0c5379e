import Foundation
import ImageLoading
import XCTest

final class PNGCodecTests: XCTestCase {
    func testRGBAPNGDecodesToItsExactPixels() throws {
        let data = try PillowFixtures.make("rgba.png", """
            im = Image.new('RGBA', (3, 2))
            im.putdata([(255, 0, 0, 255), (0, 255, 0, 128), (0, 0, 255, 0),
                        (10, 20, 30, 40), (255, 255, 255, 255), (0, 0, 0, 255)])
            save('rgba.png', im)
            """)
        XCTAssertEqual(ImageFormat(sniffing: data), .png)
        let image = try Image(data: data, scale: 2)
        XCTAssertEqual(image.width, 3)
        XCTAssertEqual(image.height, 2)
        XCTAssertEqual(image.scale, 2)
        XCTAssertEqual(image.frames, [])
        XCTAssertEqual(image.pixels, [255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 0,
                                      10, 20, 30, 40, 255, 255, 255, 255, 0, 0, 0, 255])
    }

    func testPaletteGreyAndSixteenBitPNGsBecomeRGBA8() throws {
        let files = try PillowFixtures.make("""
            p = Image.new('P', (2, 2))
            p.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 0])
            p.putdata([0, 1, 2, 3])
            save('palette.png', p)
            save('grey.png', Image.new('L', (5, 7), 77))
            g = Image.new('I;16', (2, 1))
            g.putdata([0, 65535])
            save('grey16.png', g)
            """)
        let palette = try Image(data: try XCTUnwrap(files["palette.png"]))
        XCTAssertEqual(palette.pixels, [255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255, 255, 255, 0, 255])
        let grey = try Image(data: try XCTUnwrap(files["grey.png"]))
        XCTAssertEqual(grey.width, 5)
        XCTAssertEqual(grey.height, 7)
        XCTAssertEqual(grey.rgba(4, 6), [77, 77, 77, 255])
        let grey16 = try Image(data: try XCTUnwrap(files["grey16.png"]))
        XCTAssertEqual(grey16.pixels, [0, 0, 0, 255, 255, 255, 255, 255])
    }

    func testPNGDataRoundTripsExactly() throws {
        var pixels: [UInt8] = []
        for index in 0..<(7 * 5) {
            pixels += [UInt8(index * 7 % 256), UInt8(index * 13 % 256), UInt8(255 - index), UInt8(index * 29 % 256)]
        }
        let image = try Image(width: 7, height: 5, pixels: pixels, scale: 3)
        let png = try image.pngData()
        XCTAssertEqual(ImageFormat(sniffing: png), .png)
        let decoded = try Image(data: png, scale: 3)
        XCTAssertEqual(decoded, image)
    }

    func testPNGDataIsReadableByPillow() throws {
        let image = try Image(width: 2, height: 1, pixels: [1, 2, 3, 4, 250, 251, 252, 253])
        let png = try image.pngData()
        let encoded = png.base64EncodedString()
        let answer = try PillowFixtures.make("answer.txt", """
            import base64, io
            im = Image.open(io.BytesIO(base64.b64decode('\(encoded)')))
            raw('answer.txt', repr((im.size, im.mode, list(im.getdata()))).encode())
            """)
        XCTAssertEqual(String(decoding: answer, as: UTF8.self), "((2, 1), 'RGBA', [(1, 2, 3, 4), (250, 251, 252, 253)])")
    }

    func testAnimationIsEncodedAsItsFirstFrame() throws {
        let first = [UInt8](repeating: 9, count: 4)
        let image = try Image(width: 1, height: 1, pixels: first,
                              frames: [ImageFrame(pixels: first, delay: 0.1), ImageFrame(pixels: [1, 1, 1, 1], delay: 0.1)])
        XCTAssertEqual(try Image(data: try image.pngData()).pixels, first)
    }
}
