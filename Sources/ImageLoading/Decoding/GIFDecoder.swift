internal import CImageCodecs
import Foundation

/// GIF through giflib's record-by-record API (not `DGifSlurp`, which allocates a frame's
/// raster from its header before anything can check the size): every frame is composed onto
/// the canvas with its transparency and the previous frame's disposal, as browsers do.
enum GIFDecoder {
    /// Browsers show frames whose delay is 0 or 10 ms for 100 ms; so does Curlew.
    static let defaultFrameDelay: TimeInterval = 0.1

    /// The bytes giflib reads through its input callback.
    final class Source {
        let base: UnsafePointer<UInt8>
        let count: Int
        var position = 0
        /// Set when giflib asked for bytes past the end: a truncated file, not a corrupt one.
        var ranOut = false

        init(base: UnsafePointer<UInt8>, count: Int) {
            self.base = base
            self.count = count
        }
    }

    /// What the Graphics Control Extension says about the next frame.
    private struct FrameControl {
        var disposal = 0
        var delay = GIFDecoder.defaultFrameDelay
        var transparentIndex = -1
    }

    /// A frame's rectangle on the canvas (giflib's fields are unsigned: never negative).
    struct Rect {
        var left = 0, top = 0, width = 0, height = 0
    }

    /// Decodes every frame; a single-frame GIF becomes a still image. With a maximum size in
    /// `options`, each frame is downsampled as soon as it is composed.
    static func decode(_ data: Data, options: Image.DecodingOptions) throws -> ImageDecoderOutput {
        try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> ImageDecoderOutput in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { throw ImageError.emptyData }
            let source = Source(base: base, count: raw.count)
            return try withExtendedLifetime(source) {
                var openError: Int32 = 0
                guard let gif = DGifOpen(Unmanaged.passUnretained(source).toOpaque(), readBytes, &openError) else {
                    throw failure(code: openError, source: source)
                }
                defer {
                    var closeError: Int32 = 0
                    _ = DGifCloseFile(gif, &closeError)
                }
                return try decodeFrames(gif, source: source, options: options)
            }
        }
    }

    /// giflib's input callback: copies up to `length` bytes from the `Source` in `UserData`.
    private static let readBytes: InputFunc = { gif, buffer, length in
        guard let gif, let buffer, length > 0, let user = gif.pointee.UserData else { return 0 }
        let source = Unmanaged<Source>.fromOpaque(user).takeUnretainedValue()
        let available = min(Int(length), source.count - source.position)
        if available < Int(length) { source.ranOut = true }
        guard available > 0 else { return 0 }
        buffer.update(from: source.base + source.position, count: available)
        source.position += available
        return Int32(available)
    }

    private static func decodeFrames(
        _ gif: UnsafeMutablePointer<GifFileType>, source: Source, options: Image.DecodingOptions
    ) throws -> ImageDecoderOutput {
        let width = Int(gif.pointee.SWidth)
        let height = Int(gif.pointee.SHeight)
        try options.checkBudget(width: width, height: height, format: .gif)
        var canvas = [UInt8](repeating: 0, count: width * height * 4)
        var frames: [ImageFrame] = []
        // Downsampled: each frame is resampled straight from the canvas as it is composed, so
        // no full-size copy of a frame is made or kept (the canvas stays the only full-size
        // buffer, and stays in cache), and `Image.fit` finds the output already fits.
        let fitted = options.targetPixelSize.flatMap {
            Image.fittedSize(width: width, height: height, maximumPixelSize: $0)
        }
        var control = FrameControl()
        // The previous frame's disposal, applied just before the next frame is drawn.
        var pendingDisposal = 0
        var pendingRect = Rect()
        var savedCanvas: [UInt8]?
        // Pixels LZW-decoded so far, all frames together: within the pixel budget.
        var decodedPixels = 0
        records: while true {
            do {
                var record = UNDEFINED_RECORD_TYPE
                guard DGifGetRecordType(gif, &record) == CImageGIFOK else {
                    throw failure(code: gif.pointee.Error, source: source)
                }
                if record == TERMINATE_RECORD_TYPE { break records }
                if record == EXTENSION_RECORD_TYPE {
                    try readExtension(gif, source: source, into: &control)
                    continue records
                }
                guard record == IMAGE_DESC_RECORD_TYPE else { continue records }
                guard DGifGetImageDesc(gif) == CImageGIFOK else { throw failure(code: gif.pointee.Error, source: source) }
                let descriptor = gif.pointee.Image
                let frame = FrameLayout(
                    rect: Rect(left: Int(descriptor.Left), top: Int(descriptor.Top),
                               width: Int(descriptor.Width), height: Int(descriptor.Height)),
                    interlaced: descriptor.Interlace, canvasWidth: width, canvasHeight: height)
                // Checked before each frame: all frames within the budget, and at most
                // DecodingOptions.maximumFrameCount of them (a 1 × 1 canvas fits any budget).
                try options.checkAnimationBudget(width: width, height: height, frameCount: frames.count + 1)
                // The work a frame costs is what it decompresses, not what it claims: a huge
                // frame over a small canvas costs only its rows that reach the canvas.
                let (cost, overflow) = frame.rowsToRead.multipliedReportingOverflow(by: frame.rect.width)
                let (total, totalOverflow) = decodedPixels.addingReportingOverflow(cost)
                guard !overflow, !totalOverflow, total <= options.pixelBudget else {
                    if frames.isEmpty { throw ImageError.tooLarge(width: frame.rect.width, height: frame.rect.height) }
                    throw ImageError.animationTooLarge(width: width, height: height, frameCount: frames.count + 1)
                }
                decodedPixels = total
                switch pendingDisposal {
                case Int(DISPOSE_BACKGROUND): clear(pendingRect, in: &canvas, width: width, height: height)
                case Int(DISPOSE_PREVIOUS): if let savedCanvas { canvas = savedCanvas }
                default: break
                }
                savedCanvas = control.disposal == Int(DISPOSE_PREVIOUS) ? canvas : nil
                // A frame without a colour table uses the global one, else a grey ramp (as Pillow).
                let colorMap = descriptor.ColorMap ?? gif.pointee.SColorMap
                if let colorMap, let colors = colorMap.pointee.Colors, colorMap.pointee.ColorCount > 0 {
                    let palette = UnsafeBufferPointer(start: colors, count: Int(colorMap.pointee.ColorCount))
                    try drawFrame(gif, source: source, frame: frame, palette: palette,
                                  transparentIndex: control.transparentIndex, canvas: &canvas)
                } else {
                    try greyPalette.withUnsafeBufferPointer { palette in
                        try drawFrame(gif, source: source, frame: frame, palette: palette,
                                      transparentIndex: control.transparentIndex, canvas: &canvas)
                    }
                }
                if let fitted {
                    let pixels = Image.areaResample(canvas, width: width, height: height,
                                                    toWidth: fitted.width, height: fitted.height)
                    frames.append(ImageFrame(pixels: pixels, delay: control.delay))
                } else {
                    // Shares the canvas's storage: drawing the next frame copies it first.
                    frames.append(ImageFrame(pixels: canvas, delay: control.delay))
                }
                pendingDisposal = control.disposal
                pendingRect = frame.rect
                control = FrameControl()
            } catch let error as ImageError {
                // Browsers and Pillow show the frames decoded before a structural error (an
                // unknown record, a broken extension, a cut-off file); a budget error still throws.
                guard error.isDamage, !frames.isEmpty else { throw error }
                break records
            }
        }
        guard !frames.isEmpty else { throw ImageError.corrupt(.gif, reason: "the file holds no image.") }
        return ImageDecoderOutput(width: fitted?.width ?? width, height: fitted?.height ?? height, frames: frames)
    }

    /// Reads one extension and its sub-blocks; a Graphics Control Extension sets `control`.
    private static func readExtension(
        _ gif: UnsafeMutablePointer<GifFileType>, source: Source, into control: inout FrameControl
    ) throws {
        var code: Int32 = 0
        var block: UnsafeMutablePointer<GifByteType>?
        guard DGifGetExtension(gif, &code, &block) == CImageGIFOK else {
            throw failure(code: gif.pointee.Error, source: source)
        }
        if code == GRAPHICS_EXT_FUNC_CODE, let block {
            // block[0] is the sub-block's length, the data follows.
            var gcb = GraphicsControlBlock()
            if DGifExtensionToGCB(Int(block[0]), block + 1, &gcb) == CImageGIFOK {
                control.disposal = Int(gcb.DisposalMode)
                control.transparentIndex = Int(gcb.TransparentColor)
                control.delay = gcb.DelayTime <= 1 ? defaultFrameDelay : TimeInterval(gcb.DelayTime) / 100
            }
        }
        while block != nil {
            guard DGifGetExtensionNext(gif, &block) == CImageGIFOK else {
                throw failure(code: gif.pointee.Error, source: source)
            }
        }
    }

    /// Disposal to background: browsers clear to transparent rather than the background colour.
    private static func clear(_ rect: Rect, in canvas: inout [UInt8], width: Int, height: Int) {
        let left = max(0, rect.left), right = min(width, rect.left + rect.width)
        let top = max(0, rect.top), bottom = min(height, rect.top + rect.height)
        guard left < right, top < bottom else { return }
        for y in top..<bottom {
            let start = (y * width + left) * 4
            let end = (y * width + right) * 4
            for index in start..<end { canvas[index] = 0 }
        }
    }

    /// The ImageError for giflib error `code`: truncated when the data ran out.
    static func failure(code: Int32, source: Source) -> ImageError {
        if source.ranOut { return .truncated(.gif) }
        let message = GifErrorString(code).map { String(cString: $0) } ?? "giflib error \(code)"
        return .corrupt(.gif, reason: message)
    }
}

extension ImageError {
    /// Whether the file is damaged (cut off or corrupt), as opposed to refused by a budget.
    fileprivate var isDamage: Bool {
        switch self {
        case .truncated, .corrupt: return true
        default: return false
        }
    }
}
