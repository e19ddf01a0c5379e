internal import CImageCodecs
import Foundation

/// WebP through libwebp: lossy, lossless and alpha with `WebPDecode` into our own buffer,
/// animations with `WebPAnimDecoder` (which composes each frame onto the canvas).
enum WebPDecoder {
    /// Decodes a still or animated WebP to straight-alpha RGBA8.
    static func decode(_ data: Data, options: Image.DecodingOptions) throws -> ImageDecoderOutput {
        try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> ImageDecoderOutput in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { throw ImageError.emptyData }
            var features = WebPBitstreamFeatures()
            let status = WebPGetFeatures(base, raw.count, &features)
            guard status == VP8_STATUS_OK else { throw failure(status, raw) }
            if features.has_animation != 0 {
                return try decodeAnimation(base, count: raw.count, features: features, options: options)
            }
            let sourceWidth = Int(features.width)
            let sourceHeight = Int(features.height)
            try options.checkBudget(width: sourceWidth, height: sourceHeight, format: .webp)
            var config = WebPDecoderConfig()
            guard WebPInitDecoderConfig(&config) != 0 else {
                throw ImageError.corrupt(.webp, reason: "libwebp's decoder version does not match its header.")
            }
            // An opaque image to be shrunk is scaled by libwebp while it decodes (an area
            // average too, with nothing to premultiply): no full-size RGBA buffer, no second
            // pass. With alpha, libwebp would average colour without weighting it by alpha, so
            // that is decoded whole and resampled by Image.fit, which does.
            var (width, height) = (sourceWidth, sourceHeight)
            if features.has_alpha == 0, let target = options.targetPixelSize,
               let fitted = Image.fittedSize(width: sourceWidth, height: sourceHeight, maximumPixelSize: target) {
                (width, height) = fitted
                config.options.use_scaling = 1
                config.options.scaled_width = Int32(width)
                config.options.scaled_height = Int32(height)
            }
            // Decoded straight into the image's buffer (WebPDecode writes every row or fails):
            // non-premultiplied RGBA, rows packed.
            let pixels = try [UInt8].decodedPixels(count: width * height * 4) { output in
                config.output.colorspace = MODE_RGBA
                config.output.is_external_memory = 1
                config.output.u.RGBA.rgba = output
                config.output.u.RGBA.stride = Int32(width * 4)
                config.output.u.RGBA.size = width * height * 4
                defer { WebPFreeDecBuffer(&config.output) }
                let decoded = WebPDecode(base, raw.count, &config)
                guard decoded == VP8_STATUS_OK else { throw failure(decoded, raw) }
            }
            return ImageDecoderOutput(width: width, height: height, pixels: pixels)
        }
    }

    /// Every frame of an animated WebP, composed by libwebp's animation decoder.
    ///
    /// `WebPAnimDecoderNew` allocates two full canvases at once, so the canvas (from the VP8X
    /// header) and the frame count (from the demuxer, which allocates only a small record per
    /// frame) are checked against the budget before it is called.
    private static func decodeAnimation(
        _ base: UnsafePointer<UInt8>, count: Int, features: WebPBitstreamFeatures, options: Image.DecodingOptions
    ) throws -> ImageDecoderOutput {
        let raw = UnsafeRawBufferPointer(start: base, count: count)
        try options.checkBudget(width: Int(features.width), height: Int(features.height), format: .webp)
        var webpData = WebPData(bytes: base, size: count)
        let (width, height, frameCount) = try animationHeader(&webpData, raw)
        try options.checkBudget(width: width, height: height, format: .webp)
        try options.checkAnimationBudget(width: width, height: height, frameCount: frameCount)
        var decoderOptions = WebPAnimDecoderOptions()
        guard WebPAnimDecoderOptionsInit(&decoderOptions) != 0 else {
            throw ImageError.corrupt(.webp, reason: "libwebp's demuxer version does not match its header.")
        }
        decoderOptions.color_mode = MODE_RGBA
        decoderOptions.use_threads = 0
        guard let decoder = WebPAnimDecoderNew(&webpData, &decoderOptions) else {
            if isTruncated(raw) { throw ImageError.truncated(.webp) }
            throw ImageError.corrupt(.webp, reason: "libwebp could not parse the animation.")
        }
        defer { WebPAnimDecoderDelete(decoder) }
        var info = WebPAnimInfo()
        guard WebPAnimDecoderGetInfo(decoder, &info) != 0,
              Int(info.canvas_width) == width, Int(info.canvas_height) == height
        else {
            throw ImageError.corrupt(.webp, reason: "libwebp could not read the animation's header.")
        }
        let byteCount = width * height * 4
        // Downsampled: each frame resampled straight from libwebp's canvas, never copied whole.
        let fitted = options.targetPixelSize.flatMap {
            Image.fittedSize(width: width, height: height, maximumPixelSize: $0)
        }
        var frames: [ImageFrame] = []
        frames.reserveCapacity(frameCount)
        var previousTimestamp: Int32 = 0
        while WebPAnimDecoderHasMoreFrames(decoder) != 0 {
            var canvas: UnsafeMutablePointer<UInt8>?
            var timestamp: Int32 = 0
            guard WebPAnimDecoderGetNext(decoder, &canvas, &timestamp) != 0, let canvas else {
                throw ImageError.corrupt(.webp, reason: "libwebp could not decode frame \(frames.count + 1).")
            }
            // Timestamps are each frame's end time in milliseconds; tiny durations get the
            // browsers' 100 ms, as GIF does.
            let milliseconds = Int(timestamp) - Int(previousTimestamp)
            previousTimestamp = timestamp
            let delay = milliseconds <= 10 ? GIFDecoder.defaultFrameDelay : TimeInterval(milliseconds) / 1000
            let pixels = UnsafeBufferPointer(start: canvas, count: byteCount)
            if let fitted {
                let scaled = Image.areaResample(pixels, width: width, height: height,
                                                toWidth: fitted.width, height: fitted.height)
                frames.append(ImageFrame(pixels: scaled, delay: delay))
            } else {
                frames.append(ImageFrame(pixels: Array(pixels), delay: delay))
            }
        }
        guard !frames.isEmpty else { throw ImageError.corrupt(.webp, reason: "the animation has no frame.") }
        return ImageDecoderOutput(width: fitted?.width ?? width, height: fitted?.height ?? height, frames: frames)
    }

    /// The canvas size and frame count, read by libwebp's demuxer (no pixel memory).
    private static func animationHeader(_ data: inout WebPData, _ raw: UnsafeRawBufferPointer) throws
        -> (width: Int, height: Int, frameCount: Int)
    {
        guard let demuxer = WebPDemux(&data) else {
            if isTruncated(raw) { throw ImageError.truncated(.webp) }
            throw ImageError.corrupt(.webp, reason: "libwebp could not parse the animation.")
        }
        defer { WebPDemuxDelete(demuxer) }
        return (Int(WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_WIDTH)), Int(WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_HEIGHT)),
                Int(WebPDemuxGetI(demuxer, WEBP_FF_FRAME_COUNT)))
    }

    /// The ImageError for libwebp's `status`.
    private static func failure(_ status: VP8StatusCode, _ data: UnsafeRawBufferPointer) -> ImageError {
        if status == VP8_STATUS_NOT_ENOUGH_DATA || isTruncated(data) { return .truncated(.webp) }
        let reason: String
        switch status {
        case VP8_STATUS_OUT_OF_MEMORY: reason = "libwebp ran out of memory."
        case VP8_STATUS_INVALID_PARAM: reason = "libwebp was given an invalid parameter."
        case VP8_STATUS_BITSTREAM_ERROR: reason = "the bitstream is invalid."
        case VP8_STATUS_UNSUPPORTED_FEATURE: reason = "the file uses a feature libwebp does not support."
        case VP8_STATUS_SUSPENDED: reason = "decoding was suspended."
        case VP8_STATUS_USER_ABORT: reason = "decoding was aborted."
        default: reason = "libwebp status \(status.rawValue)."
        }
        return .corrupt(.webp, reason: reason)
    }

    /// Whether the RIFF header promises more bytes than there are.
    private static func isTruncated(_ data: UnsafeRawBufferPointer) -> Bool {
        guard data.count >= 8 else { return true }
        let riffSize = Int(data[4]) | Int(data[5]) << 8 | Int(data[6]) << 16 | Int(data[7]) << 24
        return riffSize + 8 > data.count
    }
}
