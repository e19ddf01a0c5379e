import Foundation

/// Why an image could not be made.
public enum ImageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Pixel dimensions, scale or buffer size do not describe a valid RGBA image.
    case invalidPixelBuffer

    // ImageDownloader
    /// The session manager's response serializer produced something other than an ``Image``
    /// (its type name attached): give the downloader's manager an `ImageResponseSerializer`.
    case unexpectedResponseObject(String)
}

extension ImageError {
    /// A readable explanation.
    public var description: String {
        switch self {
        case .invalidPixelBuffer:
            return "The pixel buffer does not match the image's width, height and scale."
        case .unexpectedResponseObject(let type):
            return "The response serializer produced a \(type), not an Image."
        }
    }
}
