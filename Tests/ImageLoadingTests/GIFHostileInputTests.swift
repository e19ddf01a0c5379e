import Foundation
import ImageLoading
import XCTest

/// GIFs built byte by byte to attack the decoder (frames far larger than their canvas) or to
/// be damaged the way real files are (browsers and Pillow still show them).
final class GIFHostileInputTests: XCTestCase {
    /// GIFDecoderTests' writer (its `lzw`, `gif`, `palette` and `frames`), plus pieces to put
    /// a GIF together freely: a header with or without a global colour table, a frame with any
    /// rectangle, interlace flag and LZW data, and raw bytes.
    static let builder = GIFDecoderTests.writer + """
        def header(width, height, table=palette):
            if table is None:
                return b'GIF89a' + struct.pack('<HH', width, height) + bytes([0, 0, 0])
            return b'GIF89a' + struct.pack('<HH', width, height) + bytes([0xF1, 0, 0]) + b''.join(bytes(c) for c in table)

        def frame(left, top, w, h, data, interlace=False, disposal=1):
            gce = b'\\x21\\xF9\\x04' + bytes([disposal << 2]) + struct.pack('<H', 10) + b'\\x00\\x00'
            return gce + b'\\x2C' + struct.pack('<HHHH', left, top, w, h) + bytes([0x40 if interlace else 0]) + data

        # LZW data that no decoder can read: the first code after the clear code is undefined.
        garbage = bytes([2, 3, 0xFC, 0xFF, 0xFF, 0])

        """

    private static let red: [UInt8] = [255, 0, 0, 255]
    private static let green: [UInt8] = [0, 255, 0, 255]
    private static let blue: [UInt8] = [0, 0, 255, 255]
    private static let white: [UInt8] = [255, 255, 255, 255]

    // MARK: Frames larger than the canvas (issue 19, defect 11)

    func testRowsBelowTheCanvasAreNeverDecompressed() throws {
        // The CPU bomb's shape: 8192 × 8192 frames on a 1 × 1 canvas. Their LZW data holds only
        // the first row, so any attempt to decode a row below the canvas fails ("EOF too soon"):
        // decoding them (64 Mi pixels each) is what took seconds of CPU.
        let data = try PillowFixtures.make("bomb.gif", Self.builder + """
            rows = [frame(0, 0, 8192, 8192, lzw([k % 4] * 8192)) for k in range(25)]
            raw('bomb.gif', header(1, 1) + b''.join(rows) + b'\\x3B')
            """)
        let image = try Image(data: data)
        XCTAssertEqual([image.width, image.height], [1, 1])
        XCTAssertEqual(image.frames.count, 25)
        let colours = [Self.red, Self.green, Self.blue, Self.white]
        for (index, frame) in image.frames.enumerated() {
            XCTAssertEqual(frame.pixels, colours[index % 4], "frame \(index)")
        }
    }

    func testInterlacedFrameIsReadOnlyUpToItsLastRowOnTheCanvas() throws {
        // A 2 × 64 interlaced frame on a 2 × 2 canvas: rows arrive as 0, 8 … 56 (8 rows), 4 … 60
        // (8), 2 … 62 (16), then 1: the 33rd row read is row 1, the last one on the canvas.
        // The data stops there.
        let data = try PillowFixtures.make("interlaced.gif", Self.builder + """
            rows = [0, 0] + [3, 3] * 31 + [2, 1]
            raw('interlaced.gif', header(2, 2) + frame(0, 0, 2, 64, lzw(rows), interlace=True) + b'\\x3B')
            """)
        let image = try Image(data: data)
        XCTAssertEqual([image.width, image.height], [2, 2])
        XCTAssertEqual(image.rgba(0, 0), Self.red)
        XCTAssertEqual(image.rgba(1, 0), Self.red)
        XCTAssertEqual(image.rgba(0, 1), Self.blue)
        XCTAssertEqual(image.rgba(1, 1), Self.green)
    }

    func testFrameOutsideTheCanvasIsSkippedWithoutDecoding() throws {
        // The second frame lies wholly off the canvas and its data is undecodable: it is
        // passed over unread, and the frame (nothing drawn) is still part of the animation.
        let data = try PillowFixtures.make("outside.gif", Self.builder + """
            raw('outside.gif', header(2, 2) + frame(0, 0, 2, 2, lzw([0] * 4)) + frame(100, 0, 50, 50, garbage)
                + frame(0, 0, 1, 1, lzw([1])) + b'\\x3B')
            """)
        let image = try Image(data: data)
        XCTAssertEqual(image.frames.count, 3)
        XCTAssertEqual(image.frames[1].pixels, image.frames[0].pixels)
        XCTAssertEqual(image.rgba(frame: 2, 0, 0), Self.green)
        XCTAssertEqual(image.rgba(frame: 2, 1, 1), Self.red)
    }

    func testDecompressedPixelsOfAllFramesCountAgainstTheBudget() throws {
        // Three frames 8192 pixels wide, one row each, on a 2 × 2 canvas: every row reaching the
        // canvas is decompressed at the frame's full width (columns past the edge included), so
        // they cost 8192 pixels each although the canvases take 4.
        let data = try PillowFixtures.make("wide.gif", Self.builder + """
            raw('wide.gif', header(2, 2) + frame(0, 0, 8192, 1, lzw([1] * 8192)) * 3 + b'\\x3B')
            """)
        assertImageError(.animationTooLarge(width: 2, height: 2, frameCount: 3),
                         try Image(data: data, options: .init(pixelBudget: 3 * 8192 - 1)))
        let image = try Image(data: data, options: .init(pixelBudget: 3 * 8192))
        XCTAssertEqual(image.frames.count, 3)
        XCTAssertEqual(image.rgba(frame: 2, 1, 0), Self.green)
        XCTAssertEqual(image.rgba(frame: 2, 1, 1), [0, 0, 0, 0], "the second canvas row is never drawn")
        // A single frame beyond the budget is refused as too large, named by its own size.
        let still = try PillowFixtures.make("still.gif", Self.builder + """
            raw('still.gif', header(2, 2) + frame(0, 0, 8192, 1, lzw([1] * 8192)) + b'\\x3B')
            """)
        assertImageError(.tooLarge(width: 8192, height: 1), try Image(data: still, options: .init(pixelBudget: 8191)))
    }

    // MARK: Damaged GIFs browsers show (issue 19, defect 13)

    func testFramesBeforeAStructuralErrorAreKept() throws {
        let files = try PillowFixtures.make(Self.builder + """
            whole = gif(4, 4, palette, frames, trailer=False)
            raw('record.gif', whole + b'\\x99')                          # an unknown record type
            raw('extension.gif', whole + b'\\x21\\xF9\\x04\\x00')          # cut inside an extension
            raw('lzw.gif', gif(4, 4, palette, frames[:2], trailer=False)
                + frame(0, 0, 4, 4, garbage) + b'\\x3B')                  # a frame that cannot decode
            raw('first.gif', header(4, 4) + b'\\x99')                     # no frame before the error
            """)
        XCTAssertEqual(try Image(data: try XCTUnwrap(files["record.gif"])).frames.count, 4)
        XCTAssertEqual(try Image(data: try XCTUnwrap(files["extension.gif"])).frames.count, 4)
        let twoFrames = try Image(data: try XCTUnwrap(files["lzw.gif"]))
        XCTAssertEqual(twoFrames.frames.count, 2, "the broken third frame is dropped, the two before it kept")
        XCTAssertEqual(twoFrames.rgba(frame: 1, 1, 1), Self.green)
        XCTAssertThrowsError(try Image(data: try XCTUnwrap(files["first.gif"]))) { error in
            guard case .corrupt(.gif, _) = error as? ImageError else { return XCTFail("\(error)") }
        }
    }

    func testFrameWithoutAnyColourTableIsShownInGrey() throws {
        // No global table and no local one: index i is grey i, as Pillow shows it.
        let data = try PillowFixtures.make("grey.gif", Self.builder + """
            raw('grey.gif', header(2, 2, table=None) + frame(0, 0, 2, 2, lzw([0, 64, 128, 255], minimum=8)) + b'\\x3B')
            """)
        let image = try Image(data: data)
        XCTAssertEqual(image.pixels, [0, 0, 0, 255, 64, 64, 64, 255, 128, 128, 128, 255, 255, 255, 255, 255])
    }
}
