import Foundation

extension Image {
    /// Decodes a PNG, JPEG, GIF or WebP image at full size.
    ///
    /// The format is recognised from the bytes (see ``ImageFormat``), never from a content
    /// type. Pixels come out as straight-alpha RGBA8, top row first; a JPEG's EXIF orientation
    /// is applied so the pixels are upright; an animated GIF or WebP fills ``frames`` (each one
    /// a composed canvas) and ``pixels`` holds the first frame. An animated PNG decodes as its
    /// default (first) image; a PNG with a gamma other than sRGB's is converted to sRGB.
    ///
    /// - Parameters:
    ///   - data: the encoded image.
    ///   - scale: pixels per point (2 for an `@2x` image).
    /// - Throws: ``ImageError``: `.emptyData`, `.unsupportedFormat`, `.truncated`, `.corrupt`
    ///   (also for a JPEG of more than 100 scans), `.tooLarge` (beyond
    ///   ``DecodingOptions/defaultPixelBudget``), `.animationTooLarge`, `.invalidPixelBuffer` for
    ///   a scale that is not a finite positive number. A GIF that breaks after a whole frame
    ///   decodes as the frames before the break.
    public init(data: Data, scale: Double = 1) throws {
        try self.init(data: data, scale: scale, options: .default)
    }

    /// Decodes a PNG, JPEG, GIF or WebP image with `options`: downsampled so its longer side
    /// is at most ``DecodingOptions/maximumPixelSize`` (a JPEG is decoded at a reduced scale
    /// directly), within ``DecodingOptions/pixelBudget``.
    ///
    /// - Throws: as ``init(data:scale:)``; the budget is `options.pixelBudget`.
    public init(data: Data, scale: Double = 1, options: DecodingOptions) throws {
        guard scale.isFinite, scale > 0 else { throw ImageError.invalidPixelBuffer }
        guard !data.isEmpty else { throw ImageError.emptyData }
        guard let format = ImageFormat(sniffing: data) else {
            throw ImageError.unsupportedFormat(detected: ImageFormat.describeUnsupported(data))
        }
        var output: ImageDecoderOutput
        switch format {
        case .png: output = try PNGCodec.decode(data, options: options)
        case .jpeg: output = try JPEGDecoder.decode(data, options: options)
        case .gif: output = try GIFDecoder.decode(data, options: options)
        case .webp: output = try WebPDecoder.decode(data, options: options)
        }
        if let target = options.targetPixelSize {
            Image.fit(&output, maximumPixelSize: target)
        }
        try self.init(width: output.width, height: output.height, pixels: output.pixels, scale: scale,
                      frames: output.frames)
    }
}
