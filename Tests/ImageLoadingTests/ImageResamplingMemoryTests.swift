import Foundation
@testable import ImageLoading
import XCTest

/// Resampling's working memory is bounded whatever the image's size (issue 19, defect 12): it
/// used to allocate a float copy of the image at its new width and old height (16 bytes per
/// pixel: 1 GiB for an 8192 × 8192 PNG fitted to 8000, four times the pixel budget).
final class ImageResamplingMemoryTests: XCTestCase {
    func testDecodingToAMaximumSizeNeedsOnlyASmallWorkingBuffer() throws {
        // A 2048 × 2048 PNG, decoded at exactly the budget and fitted to 2000: the old float
        // buffer was 2000 × 2048 × 16 bytes = 62.5 MiB against a 16 MiB budget.
        let data = try PillowFixtures.make("big.png", """
            im = Image.new('RGBA', (2048, 2048), (40, 120, 200, 255))
            ImageDraw.Draw(im).rectangle((1024, 0, 2047, 2047), fill=(250, 250, 250, 128))
            save('big.png', im)
            """)
        let probe = Image.ResamplingProbe()
        let image = try Image.ResamplingProbe.$current.withValue(probe) {
            try Image(data: data, options: .init(maximumPixelSize: 2000, pixelBudget: 2048 * 2048))
        }
        XCTAssertEqual([image.width, image.height], [2000, 2000])
        assertColor(image.rgba(10, 1000), [40, 120, 200, 255], tolerance: 1)
        assertColor(image.rgba(1990, 10), [250, 250, 250, 128], tolerance: 1)
        XCTAssertGreaterThan(probe.largestWorkingBytes, 0, "the probe saw the resample")
        XCTAssertLessThanOrEqual(probe.largestWorkingBytes, 64 * 1024,
                                 "working memory stays under 64 KiB (the budget is 16 MiB of pixels)")
    }

    func testBandedResamplingMatchesTheExactAreaAverage() throws {
        // 1100 × 3 pixels of varied colour and alpha, fitted to 700 wide: more than one band of
        // 512 output columns, and rows shared between output rows (3 → 2).
        let (width, height) = (1100, 3)
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        for index in pixels.indices { pixels[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 7) }
        let image = try Image(width: width, height: height, pixels: pixels)
        let probe = Image.ResamplingProbe()
        let scaled = Image.ResamplingProbe.$current.withValue(probe) { image.scaled(toFit: (width: 700, height: 700)) }
        XCTAssertEqual([scaled.width, scaled.height], [700, 2])
        let expected = Self.areaAverage(pixels, width: width, height: height, toWidth: 700, height: 2)
        for index in stride(from: 0, to: expected.count, by: 4) {
            assertColor(Array(scaled.pixels[index..<index + 4]), Array(expected[index..<index + 4]), tolerance: 1,
                        "pixel \(index / 4)")
        }
        XCTAssertLessThanOrEqual(probe.largestWorkingBytes, 64 * 1024)
    }

    /// The area average computed directly in Double: each output pixel sums the premultiplied
    /// source pixels under it, weighted by the area they cover.
    private static func areaAverage(_ pixels: [UInt8], width: Int, height: Int, toWidth newWidth: Int, height newHeight: Int)
        -> [UInt8]
    {
        func coverage(_ position: Int, _ output: Int, _ ratio: Double) -> Double {
            let start = Double(output) * ratio, end = Double(output + 1) * ratio
            return max(0, min(end, Double(position + 1)) - max(start, Double(position)))
        }
        let xRatio = Double(width) / Double(newWidth), yRatio = Double(height) / Double(newHeight)
        var result = [UInt8](repeating: 0, count: newWidth * newHeight * 4)
        for y in 0..<newHeight {
            for x in 0..<newWidth {
                var sums = [Double](repeating: 0, count: 4)
                for sy in Int(Double(y) * yRatio)..<min(height, Int((Double(y + 1) * yRatio).rounded(.up))) {
                    for sx in Int(Double(x) * xRatio)..<min(width, Int((Double(x + 1) * xRatio).rounded(.up))) {
                        let weight = coverage(sx, x, xRatio) * coverage(sy, y, yRatio) / (xRatio * yRatio)
                        let pixel = (sy * width + sx) * 4
                        let alpha = Double(pixels[pixel + 3]) * weight
                        for channel in 0..<3 { sums[channel] += Double(pixels[pixel + channel]) * alpha / 255 }
                        sums[3] += alpha
                    }
                }
                let out = (y * newWidth + x) * 4
                result[out + 3] = UInt8(sums[3].rounded())
                guard sums[3] > 0 else { continue }
                for channel in 0..<3 { result[out + channel] = UInt8(min(255, (sums[channel] * 255 / sums[3]).rounded())) }
            }
        }
        return result
    }
}
