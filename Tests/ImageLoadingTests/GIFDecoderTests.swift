import Foundation
import ImageLoading
import XCTest

final class GIFDecoderTests: XCTestCase {
    /// A GIF writer with nothing left to chance: every frame's rectangle, disposal, transparent
    /// index and delay are written as given (Pillow's writer would optimise them away). Image
    /// data is LZW with a clear code often enough that every code stays uncompressed.
    static let writer = """
        def lzw(indices, minimum=2):
            clear = 1 << minimum
            codes, run = [clear], 0
            for index in indices:
                if run == clear - 2:
                    codes.append(clear)
                    run = 0
                codes.append(index)
                run += 1
            codes.append(clear + 1)
            bits, count, out = 0, 0, bytearray()
            for code in codes:
                bits |= code << count
                count += minimum + 1
                while count >= 8:
                    out.append(bits & 0xFF)
                    bits >>= 8
                    count -= 8
            if count:
                out.append(bits & 0xFF)
            blocks = bytearray([minimum])
            for start in range(0, len(out), 255):
                piece = out[start:start + 255]
                blocks += bytes([len(piece)]) + piece
            return bytes(blocks + b'\\x00')

        def gif(width, height, palette, frames, trailer=True):
            out = bytearray(b'GIF89a' + struct.pack('<HH', width, height) + bytes([0xF1, 0, 0]))
            for color in palette:
                out += bytes(color)
            for frame in frames:
                left, top, w, h, indices, disposal, transparent, delay = frame
                flags = (disposal << 2) | (1 if transparent is not None else 0)
                out += b'\\x21\\xF9\\x04' + bytes([flags]) + struct.pack('<H', delay)
                out += bytes([transparent or 0, 0])
                out += b'\\x2C' + struct.pack('<HHHH', left, top, w, h) + b'\\x00'
                out += lzw(indices)
            if trailer:
                out += b'\\x3B'
            return bytes(out)

        palette = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)]
        frames = [
            (0, 0, 4, 4, [0] * 16, 1, None, 0),          # red canvas, kept; delay 0
            (1, 1, 2, 2, [1, 3, 3, 1], 2, 3, 5),         # green diagonal, 3 transparent; then cleared
            (0, 0, 1, 1, [2], 3, None, 20),              # blue corner; then restored
            (3, 3, 1, 1, [3], 1, None, 1),               # white corner; delay 10 ms
        ]

        """

    private static let red: [UInt8] = [255, 0, 0, 255]
    private static let green: [UInt8] = [0, 255, 0, 255]
    private static let blue: [UInt8] = [0, 0, 255, 255]
    private static let white: [UInt8] = [255, 255, 255, 255]
    private static let clear: [UInt8] = [0, 0, 0, 0]

    func testAnimationFramesDisposalTransparencyAndDelays() throws {
        let data = try PillowFixtures.make("anim.gif", Self.writer + "raw('anim.gif', gif(4, 4, palette, frames))")
        let image = try Image(data: data)
        XCTAssertEqual(image.width, 4)
        XCTAssertEqual(image.height, 4)
        XCTAssertEqual(image.frames.count, 4)
        XCTAssertTrue(image.isAnimated)
        XCTAssertEqual(image.frames.map(\.delay), [0.1, 0.05, 0.2, 0.1], "0 and 1 centisecond become 100 ms")
        XCTAssertEqual(image.pixels, image.frames[0].pixels, "pixels is the first frame")
        XCTAssertEqual(image.frames[0].pixels, Array([[UInt8]](repeating: Self.red, count: 16).joined()))
        // Frame 2: transparent pixels leave the red below them.
        XCTAssertEqual(image.rgba(frame: 1, 1, 1), Self.green)
        XCTAssertEqual(image.rgba(frame: 1, 2, 1), Self.red)
        XCTAssertEqual(image.rgba(frame: 1, 1, 2), Self.red)
        XCTAssertEqual(image.rgba(frame: 1, 2, 2), Self.green)
        // Frame 3: frame 2's rectangle was disposed to (transparent) background first.
        XCTAssertEqual(image.rgba(frame: 2, 0, 0), Self.blue)
        for (x, y) in [(1, 1), (2, 1), (1, 2), (2, 2)] { XCTAssertEqual(image.rgba(frame: 2, x, y), Self.clear) }
        XCTAssertEqual(image.rgba(frame: 2, 3, 3), Self.red)
        // Frame 4: frame 3 is "restore previous", so its blue corner is gone again.
        XCTAssertEqual(image.rgba(frame: 3, 0, 0), Self.red)
        XCTAssertEqual(image.rgba(frame: 3, 1, 1), Self.clear)
        XCTAssertEqual(image.rgba(frame: 3, 3, 3), Self.white)
    }

    func testAnimationIsDownsampledFrameByFrame() throws {
        let data = try PillowFixtures.make("anim.gif", Self.writer + "raw('anim.gif', gif(4, 4, palette, frames))")
        let image = try Image(data: data, options: .init(maximumPixelSize: 2))
        XCTAssertEqual([image.width, image.height], [2, 2])
        XCTAssertEqual(image.frames.count, 4)
        XCTAssertEqual(image.frames.map(\.delay), [0.1, 0.05, 0.2, 0.1])
        XCTAssertEqual(image.pixels, image.frames[0].pixels)
        XCTAssertEqual(image.rgba(frame: 0, 1, 1), Self.red)
        // Frame 3's bottom-right quarter: three red pixels around one cleared pixel.
        assertColor(image.rgba(frame: 2, 1, 1), [255, 0, 0, 191], tolerance: 1)
    }

    func testInterlacedStillGIFFromPillow() throws {
        // Pillow interlaces GIFs 16 rows or taller; each row gets its own colour.
        let data = try PillowFixtures.make("rows.gif", """
            im = Image.new('P', (5, 20))
            im.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255] + [0] * 756)
            im.putdata([y % 4 for y in range(20) for x in range(5)])
            save('rows.gif', im, interlace=True)
            """)
        let image = try Image(data: data)
        XCTAssertEqual(image.width, 5)
        XCTAssertEqual(image.height, 20)
        XCTAssertEqual(image.frames, [], "a single frame is a still image")
        let colours: [[UInt8]] = [[0, 0, 0, 255], [255, 0, 0, 255], [0, 255, 0, 255], [0, 0, 255, 255]]
        for y in 0..<20 { XCTAssertEqual(image.rgba(2, y), colours[y % 4], "row \(y)") }
    }

    func testTruncatedGIFIsAnErrorButAMissingTrailerIsNot() throws {
        let files = try PillowFixtures.make(Self.writer + """
            raw('anim.gif', gif(4, 4, palette, frames))
            raw('untrailed.gif', gif(4, 4, palette, frames, trailer=False))
            """)
        let whole = try XCTUnwrap(files["anim.gif"])
        let untrailed = try Image(data: try XCTUnwrap(files["untrailed.gif"]))
        XCTAssertEqual(untrailed.frames.count, 4, "every frame is whole: shown as browsers do")
        // Cut inside the first frame's image data (header 13 + palette 12 + GCE 8 + descriptor 10).
        assertImageError(.truncated(.gif), try Image(data: whole.prefix(13 + 12 + 8 + 10 + 4)))
        assertImageError(.truncated(.gif), try Image(data: whole.prefix(10)))
    }

    func testAnimationBeyondThePixelBudgetIsRefused() throws {
        let data = try PillowFixtures.make("anim.gif", Self.writer + "raw('anim.gif', gif(4, 4, palette, frames))")
        // 4 frames × 16 pixels = 64: three frames fit in 50, the fourth does not.
        assertImageError(.animationTooLarge(width: 4, height: 4, frameCount: 4),
                         try Image(data: data, options: .init(pixelBudget: 50)))
        XCTAssertEqual(try Image(data: data, options: .init(pixelBudget: 64)).frames.count, 4)
    }

    func testAnimationsAreCappedAtTenThousandFrames() throws {
        // 1 × 1 frames fit any pixel budget: only the frame cap stops millions of them.
        let files = try PillowFixtures.make(Self.writer + """
            tiny = (0, 0, 1, 1, [1], 1, None, 10)
            raw('cap.gif', gif(1, 1, palette, [tiny] * 10000))
            raw('over.gif', gif(1, 1, palette, [tiny] * 10001))
            """)
        XCTAssertEqual(try Image(data: try XCTUnwrap(files["cap.gif"])).frames.count, 10_000)
        assertImageError(.animationTooLarge(width: 1, height: 1, frameCount: 10_001),
                         try Image(data: try XCTUnwrap(files["over.gif"])))
    }
}
