import Foundation

extension Image {
    /// How ``Image/init(data:scale:options:)`` decodes: an optional size to downsample to, and
    /// the most pixels it may allocate.
    public struct DecodingOptions: Sendable, Hashable, Codable {
        /// The default ``pixelBudget``: 2²⁶ pixels (64 Mi pixels, 256 MiB of RGBA), e.g. 8192 × 8192.
        public static let defaultPixelBudget = 1 << 26

        /// When set, the decoded image's longer side is at most this many pixels (aspect ratio
        /// kept, never enlarged). A JPEG is decoded by libjpeg at 1/2, 1/4 or 1/8 of its size —
        /// the smallest of those still at least this large — so a 4000 × 3000 photo asked for
        /// 500 pixels is decoded at 1/8 and never occupies more than 1/64 of its full size; a
        /// still WebP without alpha is scaled by libwebp as it decodes (an area average, straight
        /// to the requested size); other images are decoded whole, then resampled with an area
        /// filter on premultiplied colour. An animated GIF or WebP is resampled frame by frame,
        /// each frame as soon as it is composed on the full-size canvas, so only the canvas and
        /// the small frames are ever held. Values below 1 count as 1.
        public var maximumPixelSize: Int?

        /// The most pixels decoding may produce, checked against the dimensions in the header
        /// before any pixel memory is allocated (after a JPEG's reduced-scale decoding is taken
        /// into account). For an animation, every frame is a full canvas and all of them count,
        /// and at most 10,000 frames are decoded whatever their size (a 1 × 1 canvas with
        /// millions of frames would otherwise fit the budget and still exhaust memory in
        /// per-frame overhead). Beyond it decoding throws ``ImageError/tooLarge(width:height:)``
        /// or ``ImageError/animationTooLarge(width:height:frameCount:)``.
        ///
        /// The budget bounds decoding work as well as memory. A GIF frame is clipped to the
        /// canvas: the rows below it are never decompressed, and a frame wholly outside it is
        /// skipped; the pixels a GIF's frames do decompress (the rows reaching the canvas, at
        /// the frame's full width) count against this budget across all frames together. A JPEG
        /// may have at most 100 scans. Resampling to ``maximumPixelSize`` works on a band of
        /// rows and columns at a time: beyond the resampled image itself it needs under 64 KiB.
        public var pixelBudget: Int

        /// Options that downsample to `maximumPixelSize` (nil: full size) within `pixelBudget`.
        public init(maximumPixelSize: Int? = nil, pixelBudget: Int = DecodingOptions.defaultPixelBudget) {
            self.maximumPixelSize = maximumPixelSize
            self.pixelBudget = pixelBudget
        }

        /// The full-size decoding with the default budget.
        public static let `default` = DecodingOptions()

        /// ``maximumPixelSize`` clamped to at least 1, or nil.
        var targetPixelSize: Int? { maximumPixelSize.map { max(1, $0) } }

        /// Throws ``ImageError/tooLarge(width:height:)`` unless a `width` × `height` image fits
        /// the budget (and both are positive).
        func checkBudget(width: Int, height: Int, format: ImageFormat) throws {
            guard width > 0, height > 0 else {
                throw ImageError.corrupt(format, reason: "the header gives a size of \(width) × \(height) pixels.")
            }
            let (area, overflow) = width.multipliedReportingOverflow(by: height)
            guard !overflow, area <= pixelBudget else { throw ImageError.tooLarge(width: width, height: height) }
        }

        /// The most frames an animation may have, whatever the budget.
        static let maximumFrameCount = 10_000

        /// The most scans a JPEG may have. Each scan costs a pass over the blocks it covers even
        /// when it holds no data; encoders write 1 (baseline) to about 10 (libjpeg's and
        /// mozjpeg's progressive scripts), so 100 leaves room for any real file while a file of
        /// thousands of empty scans stops at the 101st instead of spending seconds of CPU.
        static let maximumJPEGScanCount = 100

        /// Throws ``ImageError/animationTooLarge(width:height:frameCount:)`` unless `frameCount`
        /// canvases of `width` × `height` fit the budget, and there are at most
        /// ``maximumFrameCount`` of them.
        func checkAnimationBudget(width: Int, height: Int, frameCount: Int) throws {
            let (area, overflow) = width.multipliedReportingOverflow(by: height)
            let (total, totalOverflow) = area.multipliedReportingOverflow(by: max(1, frameCount))
            guard !overflow, !totalOverflow, total <= pixelBudget, frameCount <= Self.maximumFrameCount else {
                throw ImageError.animationTooLarge(width: width, height: height, frameCount: frameCount)
            }
        }
    }
}
