import Foundation

extension Image {
    /// The image as a PNG file (8-bit RGBA, libpng's simplified writer).
    ///
    /// An animation is written as its first frame (``pixels``); the scale is not recorded.
    ///
    /// - Throws: ``ImageError/invalidPixelBuffer`` when ``pixels`` is not `width × height × 4`
    ///   bytes (the properties were set to disagree), ``ImageError/encodingFailed(reason:)``
    ///   when libpng refuses.
    public func pngData() throws -> Data {
        guard let count = expectedByteCount, pixels.count == count else { throw ImageError.invalidPixelBuffer }
        return try PNGCodec.encode(width: width, height: height, pixels: pixels)
    }
}
