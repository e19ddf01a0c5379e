import CurlewTestSupport
import Foundation
@testable import ImageLoading
import XCTest

/// The decoders write straight into the image's buffer (issue 26): libjpeg a batch of rows per
/// call, libpng and libwebp the whole image, without zero-filling it first; an opaque WebP asked
/// for a maximum size is scaled by libwebp while it decodes.
final class DecodeIntoBufferTests: XCTestCase {
    /// Grey bands 16 rows tall over 85 rows (the last band cut short), 4:2:0: libjpeg returns
    /// several rows per call and the last batch is partial; every band must land on its own rows,
    /// at full size and at each reduced scale.
    func testJPEGRowsLandOnTheirOwnRowsAtEveryScale() throws {
        let files = try PillowFixtures.make("""
            im = Image.new('RGB', (50, 85))
            draw = ImageDraw.Draw(im)
            for band in range(6):
                grey = 20 + band * 45
                draw.rectangle((0, band * 16, 49, band * 16 + 15), fill=(grey, grey, grey))
            save('baseline.jpg', im, quality=100, subsampling=2)
            save('progressive.jpg', im, quality=100, subsampling=2, progressive=True)
            """)
        for name in ["baseline.jpg", "progressive.jpg"] {
            let data = try XCTUnwrap(files[name])
            // maximumPixelSize picks the scale: nil → 1, 43 → 1/2, 22 → 1/4, 11 → 1/8.
            for (maximum, denominator) in [(nil, 1), (43, 2), (22, 4), (11, 8)] as [(Int?, Int)] {
                let image = try Image(data: data, options: .init(maximumPixelSize: maximum))
                let label = "\(name) at 1/\(denominator)"
                XCTAssertEqual([image.width, image.height], [(50 + denominator - 1) / denominator,
                                                             (85 + denominator - 1) / denominator], label)
                for band in 0..<5 {
                    let grey = UInt8(20 + band * 45)
                    let row = (band * 16 + 8) / denominator
                    assertColor(image.rgba(image.width / 2, row), [grey, grey, grey, 255], tolerance: 6,
                                "\(label), band \(band)")
                }
                assertColor(image.rgba(image.width / 2, image.height - 1), [245, 245, 245, 255], tolerance: 6,
                            "\(label), last row")
            }
        }
    }

    /// Decoding twice gives the same bytes: the buffers are not zero-filled first, so a byte a
    /// decoder failed to write would show up as whatever the allocator handed back.
    func testEachFormatDecodesToTheSameBytesEveryTime() throws {
        let files = try PillowFixtures.make("""
            im = Image.new('RGBA', (61, 33), (10, 200, 90, 255))
            ImageDraw.Draw(im).ellipse((5, 3, 50, 30), fill=(240, 40, 10, 128))
            save('a.png', im)
            save('a.webp', im, quality=90)
            save('a.jpg', im.convert('RGB'), quality=90)
            """)
        for (name, data) in files {
            let first = try Image(data: data)
            // Fill and free buffers of the same size, so the next decode is likely handed dirty memory.
            for _ in 0..<4 { _ = [UInt8](repeating: 0xA5, count: first.pixels.count).reduce(0, &+) }
            XCTAssertEqual(try Image(data: data), first, name)
        }
    }

    /// An opaque WebP is shrunk by libwebp as it decodes (Image.fit's resampler never runs), to
    /// the same size and, near enough, the same area average; one with alpha still goes through
    /// the premultiplied resampler.
    func testOpaqueWebPIsScaledWhileDecodingAndAlphaWebPIsResampled() throws {
        let files = try PillowFixtures.make("""
            im = Image.new('RGB', (400, 300), (200, 30, 30))
            ImageDraw.Draw(im).rectangle((200, 0, 399, 299), fill=(30, 30, 200))
            save('opaque.webp', im, quality=95)
            alpha = im.convert('RGBA')
            ImageDraw.Draw(alpha).rectangle((0, 0, 49, 299), fill=(0, 255, 0, 0))
            save('alpha.webp', alpha, quality=95, exact=True)
            """)
        let opaque = try XCTUnwrap(files["opaque.webp"])
        let probe = Image.ResamplingProbe()
        let scaled = try Image.ResamplingProbe.$current.withValue(probe) {
            try Image(data: opaque, options: .init(maximumPixelSize: 100))
        }
        XCTAssertEqual([scaled.width, scaled.height], [100, 75])
        XCTAssertEqual(probe.largestWorkingBytes, 0, "libwebp scaled it: no resampling after decoding")
        let resampled = try Image(data: opaque).scaled(toFit: (width: 100, height: 100))
        XCTAssertEqual([resampled.width, resampled.height], [100, 75])
        for (x, y) in [(10, 10), (40, 60), (60, 20), (90, 70)] {
            assertColor(scaled.rgba(x, y), resampled.rgba(x, y), tolerance: 6, "(\(x), \(y))")
        }

        let alphaProbe = Image.ResamplingProbe()
        let alpha = try Image.ResamplingProbe.$current.withValue(alphaProbe) {
            try Image(data: XCTUnwrap(files["alpha.webp"]), options: .init(maximumPixelSize: 4))
        }
        XCTAssertEqual([alpha.width, alpha.height], [4, 3])
        XCTAssertGreaterThan(alphaProbe.largestWorkingBytes, 0, "a WebP with alpha is resampled by Image.fit")
        // The left column averages transparent green with as much opaque red: half-transparent
        // red, with no green bleeding in (libwebp's own scaling would give green ≈ 142).
        assertColor(alpha.rgba(0, 1), [200, 30, 30, 128], tolerance: 4, "transparent pixels lend no colour")
    }

    /// The source pixel (x, y) of a `width` × `height` image that EXIF `orientation` shows at
    /// upright (ux, uy), straight from the EXIF definition: the tests' reference.
    private static func sourcePixel(_ ux: Int, _ uy: Int, orientation: Int, width: Int, height: Int) -> (Int, Int) {
        switch orientation {
        case 2: return (width - 1 - ux, uy)
        case 3: return (width - 1 - ux, height - 1 - uy)
        case 4: return (ux, height - 1 - uy)
        case 5: return (uy, ux)
        case 6: return (uy, height - 1 - ux)
        case 7: return (width - 1 - uy, height - 1 - ux)
        case 8: return (width - 1 - uy, ux)
        default: return (ux, uy)
        }
    }

    /// `image` (as decoded, orientation 1) turned upright for `orientation` by the reference.
    private static func upright(_ image: ImageDecoderOutput, _ orientation: Int) -> (width: Int, height: Int, pixels: [UInt8]) {
        let (width, height) = orientation >= 5 ? (image.height, image.width) : (image.width, image.height)
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        for uy in 0..<height {
            for ux in 0..<width {
                let (sx, sy) = sourcePixel(ux, uy, orientation: orientation, width: image.width, height: image.height)
                let from = (sy * image.width + sx) * 4, to = (uy * width + ux) * 4
                pixels[to..<to + 4] = image.pixels[from..<from + 4]
            }
        }
        return (width, height, pixels)
    }

    /// Every orientation is applied while libjpeg writes the rows (2–4 in place, 5–8 through a
    /// band spread as columns): the result must be exactly the unoriented decode of the same
    /// JPEG data turned by the EXIF definition, at full size and reduced scales (85 rows: a
    /// partial last batch), for noisy colour, progressive and CMYK (rows converted as written).
    func testEveryOrientationAppliedWhileDecodingMatchesTheEXIFDefinition() throws {
        let files = try PillowFixtures.make("""
            import random
            rng = random.Random(5)
            im = Image.new('RGB', (50, 85))
            im.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(50 * 85)])
            cmyk = Image.new('CMYK', (37, 85))
            cmyk.putdata([tuple(rng.randrange(256) for _ in range(4)) for _ in range(37 * 85)])
            for orientation in range(1, 9):
                exif = Image.Exif()
                exif[0x0112] = orientation
                save('rgb%d.jpg' % orientation, im, quality=90, subsampling=2, exif=exif.tobytes())
                save('prog%d.jpg' % orientation, im, quality=90, progressive=True, exif=exif.tobytes())
                save('cmyk%d.jpg' % orientation, cmyk, quality=90, exif=exif.tobytes())
            """)
        for kind in ["rgb", "prog", "cmyk"] {
            for maximum in [nil, 43, 11] as [Int?] {
                let options = Image.DecodingOptions(maximumPixelSize: maximum)
                let plain = try JPEGDecoder.decode(try XCTUnwrap(files["\(kind)1.jpg"]), options: options)
                for orientation in 2...8 {
                    let label = "\(kind), orientation \(orientation), maximum \(maximum.map(String.init) ?? "none")"
                    let decoded = try JPEGDecoder.decode(try XCTUnwrap(files["\(kind)\(orientation).jpg"]), options: options)
                    let expected = Self.upright(plain, orientation)
                    XCTAssertEqual([decoded.width, decoded.height], [expected.width, expected.height], label)
                    XCTAssertTrue(decoded.pixels == expected.pixels, label)
                    XCTAssertFalse(decoded.pixels == plain.pixels, "\(label): turned at all")
                }
            }
        }
    }

    /// A cut-off JPEG is an error whatever its orientation: the flipped rows (3, 4) and the band
    /// spread as columns (5–8) see libjpeg's padding like the plain path, and the end of data
    /// is still noticed, at full size and at a reduced scale.
    func testATruncatedJPEGIsAnErrorInEveryOrientation() throws {
        let files = try PillowFixtures.make("""
            import random
            rng = random.Random(9)
            im = Image.new('RGB', (50, 85))
            im.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(50 * 85)])
            for orientation in range(1, 9):
                exif = Image.Exif()
                exif[0x0112] = orientation
                save('o%d.jpg' % orientation, im, quality=90, exif=exif.tobytes())
            """)
        for orientation in 1...8 {
            let whole = try XCTUnwrap(files["o\(orientation).jpg"])
            XCTAssertNoThrow(try Image(data: whole), "orientation \(orientation), whole")
            for maximum in [nil, 20] as [Int?] {
                assertImageError(.truncated(.jpeg),
                                 try Image(data: whole.prefix(whole.count * 2 / 3), options: .init(maximumPixelSize: maximum)))
            }
        }
    }

    /// A JPEG cut off after a few rows' data is refused at the batch that ran out of data: it
    /// was decoded to its last row first (libjpeg pads with grey), every row of a 62.5 MB
    /// buffer written, and only then found truncated. Baseline (rows decoded as read) and
    /// progressive (all scans read before the first row).
    func testATruncatedJPEGStopsWhereTheDataEnds() throws {
        // A sanitizer's shadow memory grows with what is touched: its figures are not the
        // decoder's, so under one the truncation is checked and the memory bound is not.
        let measuresMemory = !(Sanitizers.address || Sanitizers.thread)
        let files = try PillowFixtures.make("""
            import random
            rng = random.Random(3)
            small = Image.new('RGB', (64, 64))
            small.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(64 * 64)])
            im = small.resize((4000, 4000))
            save('baseline.jpg', im, quality=80)
            save('progressive.jpg', im, quality=80, progressive=True)
            """)
        // The whole image is 62,500 kB of pixels. A baseline file's rows before the cut are a
        // few MB; a progressive file's start reads every scan into libjpeg's coefficient
        // buffer (~47 MB here, bounded by `max_memory_to_use`), and the pixels must not follow.
        for (name, limit) in [("baseline.jpg", 24 * 1024), ("progressive.jpg", 60 * 1024)] {
            let whole = try XCTUnwrap(files[name])
            let cut = whole.prefix(max(4096, whole.count / 50))
            MemoryStatus.resetResidentPeak()
            let before = MemoryStatus.kilobytes("VmHWM") ?? 0
            assertImageError(.truncated(.jpeg), try Image(data: cut))
            let growth = (MemoryStatus.kilobytes("VmHWM") ?? 0) - before
            print("\(name) cut to \(cut.count) of \(whole.count) bytes: VmHWM +\(growth) kB")
            if measuresMemory { XCTAssertLessThan(growth, limit, name) }
        }
    }

    /// Orientations 5–8 spread each batch of rows as columns: for any batch size (libjpeg's
    /// varies with the scale and the sampling) and an image of odd size, every pixel must land
    /// where the EXIF definition puts it.
    func testRowPlacementSpreadsBatchesOfAnySizeAsColumns() throws {
        let (width, height) = (150, 97)
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        for index in pixels.indices { pixels[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 9) }
        let source = ImageDecoderOutput(width: width, height: height, pixels: pixels)
        for orientation in 5...8 {
            for batch in [16, 7, 1] {
                let placement = JPEGDecoder.RowPlacement(orientation: orientation, width: width, height: height)
                XCTAssertTrue(placement.transposes)
                var image = [UInt8](repeating: 0, count: pixels.count)
                pixels.withUnsafeBufferPointer { rows in
                    image.withUnsafeMutableBufferPointer { image in
                        let band = UnsafeMutablePointer<UInt8>.allocate(capacity: batch * width * 4)
                        defer { band.deallocate() }
                        var row = 0
                        while row < height {
                            let count = min(batch, height - row)
                            band.update(from: rows.baseAddress! + row * width * 4, count: count * width * 4)
                            placement.spread(band, rows: count, from: row, into: image.baseAddress!)
                            row += count
                        }
                    }
                }
                let expected = Self.upright(source, orientation)
                XCTAssertTrue(image == expected.pixels, "orientation \(orientation), batches of \(batch)")
            }
        }
    }
}
