import Foundation
import ImageLoading
import XCTest

final class JPEGDecoderTests: XCTestCase {
    func testColourGreyProgressiveAndCMYKJPEGs() throws {
        let files = try PillowFixtures.make("""
            save('colour.jpg', Image.new('RGB', (48, 32), (200, 30, 40)), quality=95)
            save('grey.jpg', Image.new('L', (16, 24), 77), quality=95)
            save('progressive.jpg', Image.new('RGB', (40, 24), (20, 90, 220)), quality=95, progressive=True)
            cmyk = Image.new('CMYK', (32, 16), (0, 255, 255, 0))
            cmyk.paste((0, 0, 0, 255), (16, 0, 32, 16))
            save('cmyk.jpg', cmyk, quality=95)
            """)
        let colour = try Image(data: try XCTUnwrap(files["colour.jpg"]))
        XCTAssertEqual(colour.width, 48)
        XCTAssertEqual(colour.height, 32)
        XCTAssertEqual(colour.pixels.count, 48 * 32 * 4)
        assertColor(colour.rgba(24, 16), [200, 30, 40, 255], tolerance: 4)
        let grey = try Image(data: try XCTUnwrap(files["grey.jpg"]))
        XCTAssertEqual(grey.width, 16)
        XCTAssertEqual(grey.height, 24)
        assertColor(grey.rgba(8, 12), [77, 77, 77, 255], tolerance: 2)
        let progressive = try Image(data: try XCTUnwrap(files["progressive.jpg"]))
        XCTAssertEqual(progressive.width, 40)
        assertColor(progressive.rgba(20, 12), [20, 90, 220, 255], tolerance: 4)
        let cmyk = try Image(data: try XCTUnwrap(files["cmyk.jpg"]))
        XCTAssertEqual(cmyk.width, 32)
        assertColor(cmyk.rgba(4, 8), [255, 0, 0, 255], tolerance: 4, "cyan 0, magenta and yellow full: red")
        assertColor(cmyk.rgba(28, 8), [0, 0, 0, 255], tolerance: 4, "full black ink")
    }

    func testEXIFOrientationsComeOutUpright() throws {
        // Four coloured quadrants; Pillow's exif_transpose is the reference for each orientation.
        let files = try PillowFixtures.make("""
            base = Image.new('RGB', (64, 32))
            draw = ImageDraw.Draw(base)
            draw.rectangle((0, 0, 31, 15), fill=(255, 0, 0))
            draw.rectangle((32, 0, 63, 15), fill=(0, 255, 0))
            draw.rectangle((0, 16, 31, 31), fill=(0, 0, 255))
            draw.rectangle((32, 16, 63, 31), fill=(255, 255, 0))
            for orientation in range(1, 9):
                exif = Image.Exif()
                exif[0x0112] = orientation
                name = 'o%d.jpg' % orientation
                save(name, base, quality=95, exif=exif.tobytes())
                upright = ImageOps.exif_transpose(Image.open(os.path.join(outdir, name))).convert('RGBA')
                save('o%d.png' % orientation, upright)
            """)
        for orientation in 1...8 {
            let decoded = try Image(data: try XCTUnwrap(files["o\(orientation).jpg"]))
            let expected = try Image(data: try XCTUnwrap(files["o\(orientation).png"]))
            XCTAssertEqual(decoded.width, expected.width, "orientation \(orientation)")
            XCTAssertEqual(decoded.height, expected.height, "orientation \(orientation)")
            XCTAssertEqual(decoded.width, orientation >= 5 ? 32 : 64, "orientation \(orientation)")
            guard decoded.width == expected.width, decoded.height == expected.height else { continue }
            // The centre of each quadrant, away from the JPEG's blurred edges.
            for (x, y) in [(8, 8), (decoded.width - 8, 8), (8, decoded.height - 8), (decoded.width - 8, decoded.height - 8)] {
                assertColor(decoded.rgba(x, y), expected.rgba(x, y), tolerance: 12, "orientation \(orientation) at \(x),\(y)")
            }
        }
    }

    func testLargeJPEGIsDecodedAtAnEighthWhenAskedForAMaximumSize() throws {
        let data = try PillowFixtures.make("big.jpg", """
            im = Image.new('RGB', (4000, 3000), (40, 120, 200))
            draw = ImageDraw.Draw(im)
            draw.rectangle((0, 0, 1999, 2999), fill=(220, 60, 30))
            save('big.jpg', im, quality=85)
            """)
        let full = try Image(data: data)
        XCTAssertEqual(full.width, 4000)
        XCTAssertEqual(full.height, 3000)
        XCTAssertEqual(full.memoryCost, 48_000_000)

        let eighth = try Image(data: data, options: .init(maximumPixelSize: 500))
        XCTAssertEqual(eighth.width, 500, "4000 / 8: libjpeg's scale_denom, no resampling")
        XCTAssertEqual(eighth.height, 375)
        XCTAssertEqual(eighth.pixels.count, 500 * 375 * 4)
        // The output size alone would also come from decoding whole and resampling: the real
        // proof that libjpeg decoded at 1/8 (scale_denom) is the pixel budget below, which the
        // full size exceeds and the 1/8 decode fits.
        XCTAssertEqual(full.memoryCost / eighth.memoryCost, 64, "a 1/8 decode holds 1/64 of the pixels")
        assertColor(eighth.rgba(100, 187), [220, 60, 30, 255], tolerance: 6)
        assertColor(eighth.rgba(400, 187), [40, 120, 200, 255], tolerance: 6)

        // Between the scales: decoded at 1/4 (1000 px), then area-resampled down to 700.
        let between = try Image(data: data, options: .init(maximumPixelSize: 700))
        XCTAssertEqual(between.width, 700)
        XCTAssertEqual(between.height, 525)
        // The pixel budget applies to what is decoded: 1/8 fits where the full size does not.
        assertImageError(.tooLarge(width: 4000, height: 3000), try Image(data: data, options: .init(pixelBudget: 1_000_000)))
        XCTAssertEqual(try Image(data: data, options: .init(maximumPixelSize: 500, pixelBudget: 1_000_000)).width, 500)
    }

    func testProgressiveJPEGMustFitTheBudgetAtFullSize() throws {
        // libjpeg keeps a progressive image's coefficients at full size whatever the output scale.
        let data = try PillowFixtures.make("big.jpg", """
            save('big.jpg', Image.new('RGB', (2000, 1000), (90, 90, 90)), quality=80, progressive=True)
            """)
        assertImageError(.tooLarge(width: 2000, height: 1000),
                         try Image(data: data, options: .init(maximumPixelSize: 250, pixelBudget: 1_000_000)))
        let eighth = try Image(data: data, options: .init(maximumPixelSize: 250))
        XCTAssertEqual([eighth.width, eighth.height], [250, 125])
    }

    func testMultiScanBaselineJPEGMustFitTheBudgetAtFullSize() throws {
        // A baseline (SOF0) JPEG whose three components come in three separate scans: libjpeg
        // buffers the whole image's coefficients for it exactly as for a progressive one. Written
        // by hand (Pillow cannot): a flat grey 2000 × 1000 image, every block DC 0 and EOB, with
        // one-symbol Huffman tables so that each block is two zero bits.
        let data = try PillowFixtures.make("multiscan.jpg", """
            def segment(marker, body):
                return b'\\xff' + bytes([marker]) + struct.pack('>H', len(body) + 2) + body
            width, height = 2000, 1000
            blocks = ((width + 7) // 8) * ((height + 7) // 8)
            scan_bytes = (blocks * 2 + 7) // 8
            table = bytes([1] + [0] * 15 + [0])  # one code of length 1, for symbol 0
            out = b'\\xff\\xd8'
            out += segment(0xDB, bytes([0]) + bytes([1] * 64))
            out += segment(0xC0, struct.pack('>BHHB', 8, height, width, 3) + bytes([1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0]))
            out += segment(0xC4, bytes([0x00]) + table + bytes([0x10]) + table)
            for component in (1, 2, 3):
                out += segment(0xDA, bytes([1, component, 0x00, 0, 63, 0]))
                body = bytearray(scan_bytes)
                if blocks * 2 % 8:
                    body[-1] = (1 << (8 - blocks * 2 % 8)) - 1  # pad the last byte with 1 bits
                out += bytes(body)
            raw('multiscan.jpg', out + b'\\xff\\xd9')
            """)
        assertImageError(.tooLarge(width: 2000, height: 1000),
                         try Image(data: data, options: .init(maximumPixelSize: 250, pixelBudget: 1_000_000)))
        let eighth = try Image(data: data, options: .init(maximumPixelSize: 250))
        XCTAssertEqual([eighth.width, eighth.height], [250, 125])
        assertColor(eighth.rgba(100, 60), [128, 128, 128, 255], tolerance: 2)
    }
}
