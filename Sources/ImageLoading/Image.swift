import Foundation

/// A decoded bitmap: 8-bit RGBA pixels ready to draw, with the scale that maps pixels to points.
///
/// `Image` is what every part of ImageLoading passes around: decoders produce it, the
/// ``AutoPurgingImageCache`` stores it (costing its ``memoryCost``), the downloader
/// hands it to its handlers and the bindings show it. Pixels are always decoded ("inflated"):
/// a toolkit can upload ``pixels`` to a texture without touching a codec.
///
/// Pixels are row-major, top row first, 4 bytes per pixel in R, G, B, A order with straight
/// (non-premultiplied) alpha; a row is exactly `width × 4` bytes, with no padding.
public struct Image: Sendable, Equatable {
    /// Width in pixels.
    public var width: Int
    /// Height in pixels.
    public var height: Int
    /// Pixels per point: 2 for an `@2x` image. The size in points is `width / scale` by
    /// `height / scale`.
    public var scale: Double
    /// `width × height × 4` bytes of RGBA; for an animation, the first frame.
    public var pixels: [UInt8]
    /// Every frame of an animated image (GIF, animated WebP) in display order, the first one
    /// included (its pixels share storage with ``pixels``); empty for a still image.
    public var frames: [ImageFrame]

    /// Wraps pixels that are already decoded.
    ///
    /// - Throws: ``ImageError/invalidPixelBuffer`` when `width` or `height` is not positive,
    ///   their product overflows, `pixels.count` is not `width × height × 4`, `scale` is not a
    ///   finite positive number, or a frame has the wrong pixel count.
    public init(width: Int, height: Int, pixels: [UInt8], scale: Double = 1, frames: [ImageFrame] = []) throws {
        guard width > 0, height > 0, scale.isFinite, scale > 0 else { throw ImageError.invalidPixelBuffer }
        let (area, areaOverflow) = width.multipliedReportingOverflow(by: height)
        let (byteCount, bytesOverflow) = area.multipliedReportingOverflow(by: 4)
        guard !areaOverflow, !bytesOverflow, pixels.count == byteCount,
              frames.allSatisfy({ $0.pixels.count == byteCount })
        else { throw ImageError.invalidPixelBuffer }
        self.width = width
        self.height = height
        self.scale = scale
        self.pixels = pixels
        self.frames = frames
    }

    /// The memory the pixels hold, in bytes: `width × height × 4` for each frame, at least one
    /// (`width × height × 4 × max(1, frames.count)`: an animation holds every decoded canvas).
    /// This is what ``AutoPurgingImageCache`` charges.
    ///
    /// The properties are public and settable, so they may disagree; the cost never traps: a
    /// negative dimension counts as 0 and a product too large for `UInt64` is `UInt64.max`.
    public var memoryCost: UInt64 {
        var cost: UInt64 = 1
        for factor in [UInt64(clamping: width), UInt64(clamping: height), 4, UInt64(max(1, frames.count))] {
            let (product, overflow) = cost.multipliedReportingOverflow(by: factor)
            if overflow { return .max }
            cost = product
        }
        return cost
    }

    /// `width × height × 4` when the dimensions are positive and that product fits an `Int`.
    var expectedByteCount: Int? {
        guard width > 0, height > 0 else { return nil }
        let (area, areaOverflow) = width.multipliedReportingOverflow(by: height)
        let (bytes, bytesOverflow) = area.multipliedReportingOverflow(by: 4)
        return areaOverflow || bytesOverflow ? nil : bytes
    }

    /// Whether ``pixels`` and every frame hold exactly `width × height × 4` bytes (the public
    /// properties can be set to disagree after ``init(width:height:pixels:scale:frames:)``).
    var hasConsistentPixels: Bool {
        guard let count = expectedByteCount else { return false }
        return pixels.count == count && frames.allSatisfy { $0.pixels.count == count }
    }

    /// The size in points: pixels divided by ``scale``.
    public var size: (width: Double, height: Double) {
        (Double(width) / scale, Double(height) / scale)
    }

    /// Whether this image has more than one frame.
    public var isAnimated: Bool { frames.count > 1 }
}
