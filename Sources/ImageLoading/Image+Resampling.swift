import Foundation

extension Image {
    /// A copy no larger than `size` in pixels, aspect ratio kept; the image itself when it
    /// already fits (it is never enlarged).
    ///
    /// Downscaling uses an area (box) filter on premultiplied colour: every output pixel is the
    /// coverage-weighted average of the source pixels under it, so thin lines and noise average
    /// out instead of aliasing, and transparent pixels lend no colour to their neighbours.
    /// Every frame of an animation is scaled; ``scale`` is unchanged. Sizes below 1 count as 1.
    ///
    /// An image whose public properties were set to disagree (``pixels`` or a frame not
    /// `width × height × 4` bytes, a dimension not positive) is returned unchanged: there is
    /// no consistent bitmap to resample.
    public func scaled(toFit size: (width: Int, height: Int)) -> Image {
        let maxWidth = max(1, size.width)
        let maxHeight = max(1, size.height)
        guard width > maxWidth || height > maxHeight, hasConsistentPixels else { return self }
        let factor = min(Double(maxWidth) / Double(width), Double(maxHeight) / Double(height))
        let newWidth = min(maxWidth, max(1, Int((Double(width) * factor).rounded())))
        let newHeight = min(maxHeight, max(1, Int((Double(height) * factor).rounded())))
        var copy = self
        copy.width = newWidth
        copy.height = newHeight
        let resample = { (pixels: [UInt8]) in
            Image.areaResample(pixels, width: width, height: height, toWidth: newWidth, height: newHeight)
        }
        copy.frames = frames.map { ImageFrame(pixels: resample($0.pixels), delay: $0.delay) }
        // The first frame and `pixels` keep sharing storage.
        copy.pixels = copy.frames.first?.pixels ?? resample(pixels)
        return copy
    }

    /// `output` with its longer side at most `maximumPixelSize` (unchanged when it fits).
    static func fit(_ output: ImageDecoderOutput, maximumPixelSize: Int) -> ImageDecoderOutput {
        let longest = max(output.width, output.height)
        guard longest > maximumPixelSize else { return output }
        let factor = Double(maximumPixelSize) / Double(longest)
        let newWidth = min(maximumPixelSize, max(1, Int((Double(output.width) * factor).rounded())))
        let newHeight = min(maximumPixelSize, max(1, Int((Double(output.height) * factor).rounded())))
        let resample = { (pixels: [UInt8]) in
            Image.areaResample(pixels, width: output.width, height: output.height, toWidth: newWidth, height: newHeight)
        }
        if output.frames.isEmpty {
            return ImageDecoderOutput(width: newWidth, height: newHeight, pixels: resample(output.pixels))
        }
        let frames = output.frames.map { ImageFrame(pixels: resample($0.pixels), delay: $0.delay) }
        return ImageDecoderOutput(width: newWidth, height: newHeight, frames: frames)
    }

    /// One output pixel's source span along an axis: the first source index and the weight
    /// (coverage, summing to 1) of each source pixel from there.
    private struct Span {
        var first: Int
        var weights: [Float]
    }

    /// The spans that map `source` pixels onto `target` (≤ `source`) pixels along one axis.
    private static func spans(source: Int, target: Int) -> [Span] {
        let ratio = Double(source) / Double(target)
        return (0..<target).map { index in
            let start = Double(index) * ratio
            let end = min(Double(source), Double(index + 1) * ratio)
            let first = Int(start.rounded(.down))
            let last = min(source - 1, Int(end.rounded(.up)) - 1)
            var weights: [Float] = []
            for position in first...max(first, last) {
                let covered = min(end, Double(position + 1)) - max(start, Double(position))
                weights.append(Float(max(0, covered) / ratio))
            }
            return Span(first: first, weights: weights)
        }
    }

    /// Area-averaged downscale of straight-alpha RGBA8, done on premultiplied colour in two
    /// separable passes (rows, then columns).
    static func areaResample(_ pixels: [UInt8], width: Int, height: Int, toWidth newWidth: Int, height newHeight: Int)
        -> [UInt8]
    {
        let columns = spans(source: width, target: newWidth)
        let rows = spans(source: height, target: newHeight)
        // Pass 1: each source row shrunk horizontally, premultiplied, as floats.
        var horizontal = [Float](repeating: 0, count: newWidth * height * 4)
        pixels.withUnsafeBufferPointer { source in
            horizontal.withUnsafeMutableBufferPointer { target in
                for y in 0..<height {
                    let sourceRow = y * width * 4
                    let targetRow = y * newWidth * 4
                    for (x, span) in columns.enumerated() {
                        var r: Float = 0, g: Float = 0, b: Float = 0, a: Float = 0
                        for (offset, weight) in span.weights.enumerated() {
                            let pixel = sourceRow + (span.first + offset) * 4
                            let alpha = Float(source[pixel + 3]) * weight
                            r += Float(source[pixel]) * alpha
                            g += Float(source[pixel + 1]) * alpha
                            b += Float(source[pixel + 2]) * alpha
                            a += alpha
                        }
                        let out = targetRow + x * 4
                        target[out] = r / 255
                        target[out + 1] = g / 255
                        target[out + 2] = b / 255
                        target[out + 3] = a
                    }
                }
            }
        }
        // Pass 2: columns shrunk vertically, then un-premultiplied back to bytes.
        var result = [UInt8](repeating: 0, count: newWidth * newHeight * 4)
        horizontal.withUnsafeBufferPointer { source in
            result.withUnsafeMutableBufferPointer { target in
                for (y, span) in rows.enumerated() {
                    for x in 0..<newWidth {
                        var r: Float = 0, g: Float = 0, b: Float = 0, a: Float = 0
                        for (offset, weight) in span.weights.enumerated() {
                            let pixel = ((span.first + offset) * newWidth + x) * 4
                            r += source[pixel] * weight
                            g += source[pixel + 1] * weight
                            b += source[pixel + 2] * weight
                            a += source[pixel + 3] * weight
                        }
                        let out = (y * newWidth + x) * 4
                        let alpha = (a.rounded()).clamped(to: 0...255)
                        target[out + 3] = UInt8(alpha)
                        guard a > 0 else { continue }
                        let unpremultiply = 255 / a
                        target[out] = UInt8((r * unpremultiply).rounded().clamped(to: 0...255))
                        target[out + 1] = UInt8((g * unpremultiply).rounded().clamped(to: 0...255))
                        target[out + 2] = UInt8((b * unpremultiply).rounded().clamped(to: 0...255))
                    }
                }
            }
        }
        return result
    }
}

extension Float {
    /// The value limited to `range`.
    fileprivate func clamped(to range: ClosedRange<Float>) -> Float {
        Swift.min(range.upperBound, Swift.max(range.lowerBound, self))
    }
}
