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

    func testAnAnimationBeyondTheBudgetIsRefusedBeforeTheDecoderAllocates() throws {
        let files = try PillowFixtures.make("""
            colours = [(255, 0, 0, 255), (0, 0, 255, 255)]
            tiny = [Image.new('RGBA', (1, 1), colour) for colour in colours]
            save('tiny.webp', tiny[0], save_all=True, append_images=tiny[1:], duration=100, lossless=True, loop=0)
            frames = [Image.new('RGBA', (4, 4), (i * 60, 0, 0, 255)) for i in range(4)]
            save('four.webp', frames[0], save_all=True, append_images=frames[1:], duration=100, lossless=True, loop=0)
            """)
        // The 1 × 1 animation's VP8X chunk (bytes 12...) made to declare a 65536 × 65535 canvas:
        // canvas width - 1 and height - 1 are 24-bit little-endian at bytes 24 and 27.
        var bytes = [UInt8](try XCTUnwrap(files["tiny.webp"]))
        XCTAssertEqual(String(decoding: bytes[12..<16], as: UTF8.self), "VP8X")
        bytes.replaceSubrange(24..<30, with: [0xFF, 0xFF, 0x00, 0xFE, 0xFF, 0x00])
        // libwebp's animation decoder callocs two 16 GiB canvases for this header. calloc maps
        // them lazily, so resident memory would hardly move: the proof that nothing is
        // allocated is an address-space limit 2 GiB above the current size, under which those
        // canvases could not be mapped (the error would then be `corrupt`, not `tooLarge`).
        MemoryStatus.resetResidentPeak()
        let residentBefore = MemoryStatus.kilobytes("VmHWM") ?? 0
        let virtualNow = try XCTUnwrap(MemoryStatus.kilobytes("VmSize"), "Linux only")
        // ThreadSanitizer and AddressSanitizer reserve terabytes of shadow memory up front and
        // map more of it on demand: a limit on the address space would fail them, not libwebp.
        try XCTSkipIf(virtualNow > 1 << 30, "the address space (\(virtualNow) kB) is a sanitizer's shadow reservation")
        let result = try MemoryStatus.withAddressSpaceLimit(bytes: (virtualNow + 2 * 1024 * 1024) * 1024) {
            Result { try Image(data: Data(bytes)) }
        }
        assertImageError(.tooLarge(width: 65536, height: 65535), try result.get())
        let residentGrowth = (MemoryStatus.kilobytes("VmHWM") ?? 0) - residentBefore
        print("huge animated WebP canvas: VmHWM +\(residentGrowth) kB")
        XCTAssertLessThan(residentGrowth, 64 * 1024)

        // The frame count is checked before decoding too: 4 frames × 16 pixels = 64 > 50.
        let four = try XCTUnwrap(files["four.webp"])
        assertImageError(.animationTooLarge(width: 4, height: 4, frameCount: 4),
                         try Image(data: four, options: .init(pixelBudget: 50)))
        XCTAssertEqual(try Image(data: four, options: .init(pixelBudget: 64)).frames.count, 4)
    }
}
