import Foundation

/// What a format decoder produces: upright, straight-alpha RGBA8 at its decoded size, before
/// any resampling to the caller's maximum size and before it becomes an ``Image``.
struct ImageDecoderOutput {
    var width: Int
    var height: Int
    /// `width × height × 4` bytes; for an animation, the first frame's canvas.
    var pixels: [UInt8]
    /// Every composed frame of an animation (two or more), empty for a still image.
    var frames: [ImageFrame]

    /// A still image.
    init(width: Int, height: Int, pixels: [UInt8]) {
        self.width = width
        self.height = height
        self.pixels = pixels
        self.frames = []
    }

    /// An image with frames; a single frame is stored as a still image.
    init(width: Int, height: Int, frames: [ImageFrame]) {
        self.width = width
        self.height = height
        self.pixels = frames.first?.pixels ?? []
        self.frames = frames.count > 1 ? frames : []
    }
}
