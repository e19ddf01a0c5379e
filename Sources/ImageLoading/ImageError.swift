import Foundation

/// Why an image could not be made.
public enum ImageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Pixel dimensions, scale or buffer size do not describe a valid RGBA image.
    case invalidPixelBuffer
}

extension ImageError {
    /// A readable explanation.
    public var description: String {
        switch self {
        case .invalidPixelBuffer:
            return "The pixel buffer does not match the image's width, height and scale."
        }
    }
}
