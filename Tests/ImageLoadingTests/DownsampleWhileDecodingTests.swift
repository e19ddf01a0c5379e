import Foundation
import ImageLoading
import XCTest

/// An animation decoded with a maximum size is resampled frame by frame as each frame is
/// composed (GIF from its canvas, WebP from libwebp's): the result must be exactly what
/// decoding whole and then scaling gives, disposal, transparency and odd ratios included.
final class DownsampleWhileDecodingTests: XCTestCase {
    /// Every frame of `data` decoded to fit `maximum`, against the full decode scaled after.
    private func assertSameAsScalingAfter(_ data: Data, maximum: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let whole = try Image(data: data)
        let expected = whole.scaled(toFit: (maximum, maximum))
        let direct = try Image(data: data, options: .init(maximumPixelSize: maximum))
        XCTAssertEqual([direct.width, direct.height], [expected.width, expected.height], "size", file: file, line: line)
        XCTAssertEqual(direct.frames.count, whole.frames.count, "frame count", file: file, line: line)
        XCTAssertEqual(direct.frames.map(\.delay), whole.frames.map(\.delay), "delays", file: file, line: line)
        XCTAssertEqual(direct.pixels, direct.frames.first?.pixels ?? direct.pixels, "pixels is the first frame", file: file, line: line)
        for index in direct.frames.indices {
            XCTAssertEqual(direct.frames[index].pixels, expected.frames[index].pixels, "frame \(index) at \(maximum)",
                           file: file, line: line)
        }
    }

    func testGIFFramesResampledAsComposedMatchScalingTheWholeDecode() throws {
        // A 23 × 17 canvas (odd ratios at every size) and frames that exercise each disposal:
        // a full noisy frame kept, a transparent patch then cleared to background, a patch
        // then restored, and a last patch over the restored canvas.
        let script = GIFDecoderTests.writer + """
            import random
            rng = random.Random(7)
            palette = [(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(4)]
            frames = [
                (0, 0, 23, 17, [rng.randrange(4) for _ in range(23 * 17)], 1, None, 10),
                (3, 2, 11, 9, [rng.randrange(4) for _ in range(11 * 9)], 2, 3, 10),
                (10, 5, 13, 12, [rng.randrange(4) for _ in range(13 * 12)], 3, 0, 10),
                (0, 8, 7, 9, [rng.randrange(4) for _ in range(7 * 9)], 1, None, 10),
            ]
            raw('odd.gif', gif(23, 17, palette, frames))
            """
        let data = try PillowFixtures.make("odd.gif", script)
        XCTAssertEqual(try Image(data: data).frames.count, 4)
        for maximum in [16, 9, 5, 1] { try assertSameAsScalingAfter(data, maximum: maximum) }
    }

    func testAnimatedWebPFramesResampledAsComposedMatchScalingTheWholeDecode() throws {
        let data = try PillowFixtures.make("odd.webp", """
            import random
            rng = random.Random(11)
            frames = []
            for index in range(3):
                frame = Image.new('RGBA', (29, 19))
                frame.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256), rng.choice([0, 90, 255]))
                               for _ in range(29 * 19)])
                frames.append(frame)
            save('odd.webp', frames[0], save_all=True, append_images=frames[1:], duration=[100, 250, 40],
                 lossless=True, exact=True, loop=0)
            """)
        XCTAssertEqual(try Image(data: data).frames.count, 3)
        for maximum in [20, 7, 2] { try assertSameAsScalingAfter(data, maximum: maximum) }
    }

    func testADamagedGIFKeepsItsWholeFramesDownsampledAndTheBudgetStillHolds() throws {
        let files = try PillowFixtures.make(GIFDecoderTests.writer + """
            frames = [(0, 0, 12, 10, [(x * y) % 4 for x in range(12) for y in range(10)], 1, None, 10),
                      (2, 2, 8, 6, [(x + y) % 4 for x in range(8) for y in range(6)], 2, 1, 10),
                      (0, 0, 12, 10, [x % 4 for x in range(120)], 1, None, 10)]
            raw('cut.gif', gif(12, 10, palette, frames, trailer=False)[:-6])
            raw('whole.gif', gif(12, 10, palette, frames))
            """)
        // Cut inside the third frame's data: the two whole frames are shown, each downsampled.
        let cut = try XCTUnwrap(files["cut.gif"])
        XCTAssertEqual(try Image(data: cut).frames.count, 2)
        try assertSameAsScalingAfter(cut, maximum: 5)
        // The budget counts the decoded (full-size) pixels, whatever size the frames end up:
        // 3 frames × 120 pixels do not fit in 300.
        let whole = try XCTUnwrap(files["whole.gif"])
        XCTAssertThrowsError(try Image(data: whole, options: .init(maximumPixelSize: 3, pixelBudget: 300))) { error in
            XCTAssertEqual(error as? ImageError, .animationTooLarge(width: 12, height: 10, frameCount: 3))
        }
    }

    func testAStillGIFWithAMaximumSizeIsAStillImage() throws {
        let data = try PillowFixtures.make("still.gif", GIFDecoderTests.writer + """
            raw('still.gif', gif(6, 4, palette, [(0, 0, 6, 4, [i % 4 for i in range(24)], 1, None, 0)]))
            """)
        let image = try Image(data: data, options: .init(maximumPixelSize: 3))
        XCTAssertEqual([image.width, image.height], [3, 2])
        XCTAssertEqual(image.frames, [], "one frame is a still image")
        XCTAssertEqual(image.pixels, try Image(data: data).scaled(toFit: (3, 3)).pixels)
    }
}
