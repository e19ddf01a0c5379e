import Foundation

extension Image {
    /// A copy no larger than `size` in pixels, aspect ratio kept; the image itself when it
    /// already fits (it is never enlarged).
    ///
    /// Downscaling uses an area (box) filter on premultiplied colour: every output pixel is the
    /// coverage-weighted average of the source pixels under it, so thin lines and noise average
    /// out instead of aliasing, and transparent pixels lend no colour to their neighbours.
    /// Every frame of an animation is scaled; ``scale`` is unchanged. Sizes below 1 count as 1.
    /// The work is done in bands of output columns and rows: beyond the copy it returns, it
    /// needs under 64 KiB whatever the image's size.
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

    /// Shrinks `output` so its longer side is at most `maximumPixelSize` (unchanged when it
    /// fits). An animation's frames are replaced one at a time, each decoded frame released
    /// once its resampled copy exists: the peak is the decoded frames plus one resampled frame.
    static func fit(_ output: inout ImageDecoderOutput, maximumPixelSize: Int) {
        guard let (newWidth, newHeight) = fittedSize(width: output.width, height: output.height,
                                                     maximumPixelSize: maximumPixelSize)
        else { return }
        let (width, height) = (output.width, output.height)
        let resample = { (pixels: [UInt8]) in
            Image.areaResample(pixels, width: width, height: height, toWidth: newWidth, height: newHeight)
        }
        if output.frames.isEmpty {
            output.pixels = resample(output.pixels)
        } else {
            // `pixels` shares the first frame's storage: let go of it so that frame can be freed.
            output.pixels = []
            for index in output.frames.indices {
                let resampled = resample(output.frames[index].pixels)
                output.frames[index].pixels = resampled
            }
            output.pixels = output.frames[0].pixels
        }
        output.width = newWidth
        output.height = newHeight
    }

    /// The size a `width` × `height` image shrinks to so its longer side is `maximumPixelSize`
    /// (aspect ratio kept, each side at least 1); nil when it already fits. A decoder that can
    /// scale while it decodes (WebP) targets this same size, so ``fit(_:maximumPixelSize:)``
    /// then leaves its output alone.
    static func fittedSize(width: Int, height: Int, maximumPixelSize: Int) -> (width: Int, height: Int)? {
        let longest = max(width, height)
        guard longest > maximumPixelSize else { return nil }
        let factor = Double(maximumPixelSize) / Double(longest)
        let newWidth = min(maximumPixelSize, max(1, Int((Double(width) * factor).rounded())))
        let newHeight = min(maximumPixelSize, max(1, Int((Double(height) * factor).rounded())))
        return (newWidth, newHeight)
    }

    /// Output columns resampled per band: bounds the working memory to two rows of this many
    /// premultiplied float pixels (16 KiB) and this many spans, whatever the image's width.
    static let resamplingBandWidth = 512

    /// One output pixel's source span along an axis: `count` source pixels from `first`, the
    /// first and last weighted by how much of them the output pixel covers, those between by
    /// 1/ratio (the weights sum to 1). O(1) in size however many pixels it spans.
    private struct Span {
        var first: Int
        var count: Int
        var firstWeight: Float
        var interiorWeight: Float
        var lastWeight: Float

        /// The weight of the source pixel at `first + offset`.
        func weight(_ offset: Int) -> Float {
            offset == 0 ? firstWeight : (offset == count - 1 ? lastWeight : interiorWeight)
        }

        /// The span mapping output pixel `index` of `target` onto `source` (≥ `target`) pixels.
        init(_ index: Int, source: Int, target: Int) {
            let ratio = Double(source) / Double(target)
            let start = Double(index) * ratio
            let end = min(Double(source), Double(index + 1) * ratio)
            let first = Int(start.rounded(.down))
            let last = max(first, min(source - 1, Int(end.rounded(.up)) - 1))
            func weight(_ position: Int) -> Float {
                let covered = min(end, Double(position + 1)) - max(start, Double(position))
                return Float(max(0, covered) / ratio)
            }
            self.first = first
            self.count = last - first + 1
            self.firstWeight = weight(first)
            self.interiorWeight = Float(1 / ratio)
            self.lastWeight = weight(last)
        }
    }

    /// Area-averaged downscale of straight-alpha RGBA8, on premultiplied colour, separably
    /// (rows, then columns), in bands of ``resamplingBandWidth`` output columns: for each
    /// output row, the source rows under it are shrunk to the band's width one at a time and
    /// summed, so the working memory is two float rows of the band, never a float copy of the
    /// image (which took 16 bytes per output column and source row).
    static func areaResample(_ pixels: [UInt8], width: Int, height: Int, toWidth newWidth: Int, height newHeight: Int)
        -> [UInt8]
    {
        pixels.withUnsafeBufferPointer { source in
            areaResample(source, width: width, height: height, toWidth: newWidth, height: newHeight)
        }
    }

    /// As ``areaResample(_:width:height:toWidth:height:)``, from pixels in memory the caller
    /// owns (a decoder's canvas): `pixels` holds `width × height × 4` bytes.
    static func areaResample(
        _ source: UnsafeBufferPointer<UInt8>, width: Int, height: Int, toWidth newWidth: Int, height newHeight: Int
    ) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: newWidth * newHeight * 4)
        let band = min(newWidth, resamplingBandWidth)
        var shrunk = [Float](repeating: 0, count: band * 4)
        var summed = [Float](repeating: 0, count: band * 4)
        var columns: [Span] = []
        columns.reserveCapacity(band)
        ResamplingProbe.current?.record(2 * band * 4 * MemoryLayout<Float>.stride + band * MemoryLayout<Span>.stride)
        precondition(source.count >= width * height * 4, "areaResample: fewer pixels than width × height")
        result.withUnsafeMutableBufferPointer { target in
            shrunk.withUnsafeMutableBufferPointer { shrunk in
                summed.withUnsafeMutableBufferPointer { summed in
                    for bandStart in stride(from: 0, to: newWidth, by: band) {
                        let bandCount = min(band, newWidth - bandStart)
                        columns.removeAll(keepingCapacity: true)
                        for x in bandStart..<bandStart + bandCount {
                            columns.append(Span(x, source: width, target: newWidth))
                        }
                        resampleBand(source, width: width, height: height, columns: columns, into: target,
                                     at: bandStart, newWidth: newWidth, newHeight: newHeight,
                                     shrunk: shrunk, summed: summed)
                    }
                }
            }
        }
        return result
    }

    /// Output columns `bandStart ..< bandStart + columns.count`, every row.
    private static func resampleBand(
        _ source: UnsafeBufferPointer<UInt8>, width: Int, height: Int, columns: [Span],
        into target: UnsafeMutableBufferPointer<UInt8>, at bandStart: Int, newWidth: Int, newHeight: Int,
        shrunk: UnsafeMutableBufferPointer<Float>, summed: UnsafeMutableBufferPointer<Float>
    ) {
        let floats = columns.count * 4
        // Consecutive output rows share the source row on their boundary: shrunk once.
        var shrunkRow = -1
        for y in 0..<newHeight {
            let rows = Span(y, source: height, target: newHeight)
            for index in 0..<floats { summed[index] = 0 }
            for offset in 0..<rows.count {
                let sourceY = rows.first + offset
                if sourceY != shrunkRow {
                    shrinkRow(source, row: sourceY * width * 4, columns: columns, into: shrunk)
                    shrunkRow = sourceY
                }
                let weight = rows.weight(offset)
                for index in 0..<floats { summed[index] += shrunk[index] * weight }
            }
            // Un-premultiplied back to bytes.
            for x in 0..<columns.count {
                let r = summed[x * 4], g = summed[x * 4 + 1], b = summed[x * 4 + 2], a = summed[x * 4 + 3]
                let out = (y * newWidth + bandStart + x) * 4
                target[out + 3] = byte(a)
                guard a > 0 else { continue }
                let unpremultiply = 255 / a
                target[out] = byte(r * unpremultiply)
                target[out + 1] = byte(g * unpremultiply)
                target[out + 2] = byte(b * unpremultiply)
            }
        }
    }

    /// `value` rounded to the nearest byte, clamped to 0...255. Adding one half and truncating
    /// is one instruction where `Float.rounded()` is a call to `roundf` (baseline x86-64 has no
    /// rounding instruction): per output channel, that call was about an eighth of the
    /// resampler's time in the profile of the WebP-with-alpha downscale.
    @inline(__always)
    private static func byte(_ value: Float) -> UInt8 {
        let clamped = Swift.min(255, Swift.max(0, value))
        return UInt8(truncatingIfNeeded: Int32(clamped + 0.5))
    }

    /// The source row starting at byte `row`, shrunk horizontally to `columns`, premultiplied.
    /// A span's first and last pixels take their own weights and the pixels between share one,
    /// so the inner loop has no branch.
    private static func shrinkRow(
        _ source: UnsafeBufferPointer<UInt8>, row: Int, columns: [Span], into shrunk: UnsafeMutableBufferPointer<Float>
    ) {
        guard let base = source.baseAddress, let out = shrunk.baseAddress else { return }
        columns.withUnsafeBufferPointer { columns in
            for x in columns.indices {
                let span = columns[x]
                var pixel = base + row + span.first * 4
                var r: Float = 0, g: Float = 0, b: Float = 0, a: Float = 0
                @inline(__always) func add(_ weight: Float) {
                    let alpha = Float(pixel[3]) * weight
                    r += Float(pixel[0]) * alpha
                    g += Float(pixel[1]) * alpha
                    b += Float(pixel[2]) * alpha
                    a += alpha
                    pixel += 4
                }
                add(span.firstWeight)
                if span.count > 1 {
                    for _ in 0..<span.count - 2 { add(span.interiorWeight) }
                    add(span.lastWeight)
                }
                let target = out + x * 4
                target[0] = r / 255
                target[1] = g / 255
                target[2] = b / 255
                target[3] = a
            }
        }
    }
}

