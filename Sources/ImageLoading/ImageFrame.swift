import Foundation

/// One frame of an animated image.
public struct ImageFrame: Sendable, Equatable {
    /// The full canvas for this frame (disposal and blending already applied): the same size
    /// and layout as ``Image/pixels``.
    public var pixels: [UInt8]
    /// How long the frame stays on screen, in seconds.
    public var delay: TimeInterval

    /// Creates a frame from a composed canvas and its display time.
    public init(pixels: [UInt8], delay: TimeInterval) {
        self.pixels = pixels
        self.delay = delay
    }
}
