import Foundation
import ImageLoading
import XCTest

final class WebPDecoderTests: XCTestCase {
    func testLosslessLossyAndAlphaWebP() throws {
        let files = try PillowFixtures.make("""
            im = Image.new('RGBA', (3, 2))
            im.putdata([(255, 0, 0, 255), (0, 255, 0, 128), (0, 0, 255, 0),
                        (10, 20, 30, 40), (255, 255, 255, 255), (0, 0, 0, 255)])
            save('lossless.webp', im, lossless=True, exact=True)
            save('lossy.webp', Image.new('RGB', (64, 48), (30, 160, 90)), quality=90)
            save('alpha.webp', Image.new('RGBA', (32, 16), (200, 100, 50, 128)), quality=90)
            """)
        let lossless = try Image(data: try XCTUnwrap(files["lossless.webp"]))
        XCTAssertEqual(lossless.width, 3)
        XCTAssertEqual(lossless.height, 2)
        XCTAssertEqual(lossless.pixels, [255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 0,
                                         10, 20, 30, 40, 255, 255, 255, 255, 0, 0, 0, 255])
        let lossy = try Image(data: try XCTUnwrap(files["lossy.webp"]))
        XCTAssertEqual(lossy.width, 64)
        XCTAssertEqual(lossy.height, 48)
        assertColor(lossy.rgba(32, 24), [30, 160, 90, 255], tolerance: 6)
        let alpha = try Image(data: try XCTUnwrap(files["alpha.webp"]))
        XCTAssertEqual(alpha.width, 32)
        assertColor(alpha.rgba(16, 8), [200, 100, 50, 128], tolerance: 6, "straight (not premultiplied) alpha")
    }

    func testAnimatedWebPFramesAndDelays() throws {
        let data = try PillowFixtures.make("anim.webp", """
            colours = [(255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255)]
            frames = [Image.new('RGBA', (16, 12), colour) for colour in colours]
            ImageDraw.Draw(frames[2]).rectangle((0, 0, 3, 3), fill=(0, 0, 0, 0))
            save('anim.webp', frames[0], save_all=True, append_images=frames[1:], duration=[100, 250, 40],
                 lossless=True, exact=True, loop=0)
            """)
        let image = try Image(data: data)
        XCTAssertEqual(image.width, 16)
        XCTAssertEqual(image.height, 12)
        XCTAssertEqual(image.frames.count, 3)
        XCTAssertEqual(image.frames.map(\.delay), [0.1, 0.25, 0.04])
        XCTAssertEqual(image.pixels, image.frames[0].pixels)
        XCTAssertEqual(image.rgba(frame: 0, 8, 6), [255, 0, 0, 255])
        XCTAssertEqual(image.rgba(frame: 1, 8, 6), [0, 255, 0, 255])
        XCTAssertEqual(image.rgba(frame: 2, 8, 6), [0, 0, 255, 255])
        XCTAssertEqual(image.rgba(frame: 2, 1, 1)[3], 0, "a transparent corner stays transparent")
    }
}
