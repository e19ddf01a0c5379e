import CurlewTestSupport
import Foundation
import ImageLoading
import XCTest

/// Bad input of every kind: a clear ImageError each time, never a crash.
final class ImageDecodingErrorTests: XCTestCase {
    private static func fixtures() throws -> [String: Data] {
        try PillowFixtures.make("""
            im = Image.new('RGB', (64, 48), (10, 200, 30))
            ImageDraw.Draw(im).ellipse((5, 5, 60, 40), fill=(200, 10, 90))
            save('image.png', im)
            save('image.jpg', im, quality=90)
            save('image.gif', im.convert('P'))
            save('image.webp', im, quality=80)
            save('image-lossless.webp', im, lossless=True)
            # A PNG whose header claims 100000 × 100000 pixels (40 GB of RGBA).
            def chunk(kind, body):
                return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body))
            raw('huge.png', b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 100000, 100000, 8, 6, 0, 0, 0))
                + chunk(b'IDAT', zlib.compress(b'\\x00' * 64)) + chunk(b'IEND', b''))
            """)
    }

    func testEmptyRandomAndNonImageData() {
        assertImageError(.emptyData, try Image(data: Data()))
        var generator = SplitMix64(seed: 42)
        let random = Data((0..<4096).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
        XCTAssertNil(ImageFormat(sniffing: random))
        assertImageError(.unsupportedFormat(detected: nil), try Image(data: random))
        let html = Data("<!DOCTYPE html>\n<html><body><h1>502 Bad Gateway</h1></body></html>".utf8)
        assertImageError(.unsupportedFormat(detected: "HTML"), try Image(data: html))
        let svg = Data("<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8)
        assertImageError(.unsupportedFormat(detected: "SVG"), try Image(data: svg))
        assertImageError(.unsupportedFormat(detected: "BMP"), try Image(data: Data("BM\u{0}\u{0}\u{0}\u{0}".utf8)))
        XCTAssertTrue(ImageError.unsupportedFormat(detected: "SVG").description.contains("SVG"))
        assertImageError(.invalidPixelBuffer, try Image(data: html, scale: 0))
    }

    func testTruncatedFilesOfEachFormat() throws {
        let files = try Self.fixtures()
        for (name, format) in [("image.png", ImageFormat.png), ("image.jpg", .jpeg), ("image.gif", .gif),
                               ("image.webp", .webp), ("image-lossless.webp", .webp)] {
            let data = try XCTUnwrap(files[name])
            XCTAssertNoThrow(try Image(data: data), name)
            assertImageError(.truncated(format), try Image(data: data.prefix(data.count / 2)))
            XCTAssertTrue(ImageError.truncated(format).description.contains("truncated"))
        }
    }

    func testEveryPrefixAndCorruptionFailsCleanly() throws {
        let files = try Self.fixtures()
        var generator = SplitMix64(seed: 7)
        for (name, data) in files.sorted(by: { $0.key < $1.key }) where name != "huge.png" {
            // Cut at 40 places, including inside every header. A prefix that lacks only the
            // end marker (PNG's IEND) may decode, but then to the whole image, never to garbage.
            let whole = try Image(data: data)
            let cuts = Set((0..<40).map { $0 * data.count / 40 } + Array(1...40) + Array(data.count - 16..<data.count))
            for cut in cuts.sorted() where cut < data.count {
                do {
                    let image = try Image(data: data.prefix(cut))
                    XCTAssertEqual(image, whole, "\(name) cut at \(cut) of \(data.count)")
                    XCTAssertGreaterThanOrEqual(cut, data.count - 12, "\(name) cut at \(cut) of \(data.count) decoded")
                } catch {
                    XCTAssertTrue(error is ImageError, "\(name) cut at \(cut): \(error)")
                }
            }
            // Overwrite bytes after the signature: decoding may succeed, but only with an ImageError if not.
            for _ in 0..<40 {
                var corrupt = data
                for _ in 0..<8 {
                    let index = 12 + Int(generator.next() % UInt64(data.count - 12))
                    corrupt[corrupt.startIndex + index] = UInt8(truncatingIfNeeded: generator.next())
                }
                do {
                    let image = try Image(data: corrupt, options: .init(pixelBudget: 1_000_000))
                    XCTAssertEqual(image.pixels.count, image.width * image.height * 4)
                } catch {
                    XCTAssertTrue(error is ImageError, "\(name) corrupted: \(error)")
                }
            }
        }
    }

    func testAbsurdDimensionsAreRefusedBeforeAllocating() throws {
        let files = try Self.fixtures()
        assertImageError(.tooLarge(width: 100_000, height: 100_000), try Image(data: try XCTUnwrap(files["huge.png"])))
        // A GIF whose logical screen is 65535 × 65535.
        var gif = Data("GIF89a".utf8)
        gif += [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x3B]
        assertImageError(.tooLarge(width: 65535, height: 65535), try Image(data: gif))
        let jpeg = try XCTUnwrap(files["image.jpg"])
        assertImageError(.tooLarge(width: 64, height: 48), try Image(data: jpeg, options: .init(pixelBudget: 1000)))
        XCTAssertTrue(ImageError.tooLarge(width: 64, height: 48).description.contains("64 × 48"))
    }
}

