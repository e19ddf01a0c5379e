import Foundation

extension Image {
    /// The image as a PNG file (8-bit RGBA, libpng's simplified writer).
    ///
    /// An animation is written as its first frame (``pixels``); the scale is not recorded.
    ///
    /// - Throws: ``ImageError/encodingFailed(reason:)`` when libpng refuses.
    public func pngData() throws -> Data {
        try PNGCodec.encode(width: width, height: height, pixels: pixels)
    }
}
