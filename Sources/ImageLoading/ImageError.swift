import Foundation

/// Why an image could not be made.
public enum ImageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Pixel dimensions, scale or buffer size do not describe a valid RGBA image.
    case invalidPixelBuffer

    // MARK: ImageDownloader
    /// The session manager's response serializer produced something other than an ``Image``
    /// (its type name attached): give the downloader's manager an `ImageResponseSerializer`.
    case unexpectedResponseObject(String)

    // MARK: Codecs (decoding and encoding)
    /// The data is empty: there is no image to decode.
    case emptyData
    /// The data is not a PNG, JPEG, GIF or WebP image. `detected` names what it looks like
    /// when that is recognisable ("SVG", "HTML", "BMP", "TIFF", "ICO", "HEIF/AVIF"…), nil when not.
    case unsupportedFormat(detected: String?)
    /// The image ends before its pixels do (a download cut short).
    case truncated(ImageFormat)
    /// The codec rejected the data; `reason` is its explanation.
    case corrupt(ImageFormat, reason: String)
    /// Decoding would need more than the pixel budget (``Image/DecodingOptions/pixelBudget``):
    /// refused before any pixel memory was allocated.
    case tooLarge(width: Int, height: Int)
    /// An animation whose frames together exceed the pixel budget (every frame is a full canvas),
    /// whose GIF frames together decompress more pixels than the budget, or that has more than
    /// 10,000 frames.
    case animationTooLarge(width: Int, height: Int, frameCount: Int)
    /// Encoding the pixels failed; `reason` is the encoder's explanation.
    case encodingFailed(reason: String)
}

extension ImageError {
    /// A readable explanation.
    public var description: String {
        switch self {
        case .invalidPixelBuffer:
            return "The pixel buffer does not match the image's width, height and scale."
        case .unexpectedResponseObject(let type):
            return "The response serializer produced a \(type), not an Image."

        // MARK: Codecs
        case .emptyData:
            return "The image data is empty."
        case .unsupportedFormat(let detected):
            let seen = detected.map { " (it looks like \($0))" } ?? ""
            return "The data is not a PNG, JPEG, GIF or WebP image\(seen); only those formats can be decoded."
        case .truncated(let format):
            return "The \(format) image is truncated: the data ends before the image does."
        case .corrupt(let format, let reason):
            return "The \(format) image is corrupt: \(reason)"
        case .tooLarge(let width, let height):
            return "The image is too large to decode: \(width) × \(height) pixels exceeds the pixel budget."
        case .animationTooLarge(let width, let height, let frameCount):
            return "The animation is too large to decode: \(frameCount) frames of \(width) × \(height) pixels "
                + "exceed the pixel budget or the limit of 10,000 frames."
        case .encodingFailed(let reason):
            return "The image could not be encoded: \(reason)"
        }
    }
}
