internal import CImageCodecs
import Foundation

/// PNG through libpng's simplified API (`png_image_*`), which reports errors in the
/// `png_image` itself and so needs no setjmp.
enum PNGCodec {
    /// Decodes any PNG (palette, grey, 16-bit, interlaced, with or without alpha) to RGBA8.
    static func decode(_ data: Data, options: Image.DecodingOptions) throws -> ImageDecoderOutput {
        try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> ImageDecoderOutput in
            guard let base = raw.baseAddress else { throw ImageError.emptyData }
            guard chunksFit(raw) else { throw ImageError.truncated(.png) }
            var image = png_image()
            image.version = CImagePNGImageVersion
            defer { png_image_free(&image) }
            guard png_image_begin_read_from_memory(&image, base, raw.count) != 0 else {
                throw error(from: &image)
            }
            let width = Int(image.width)
            let height = Int(image.height)
            try options.checkBudget(width: width, height: height, format: .png)
            image.format = CImagePNGFormatRGBA
            // Straight into the image's buffer (libpng writes every row or fails). Stride 0:
            // rows packed, top row first; no background (alpha is kept).
            let pixels = try [UInt8].decodedPixels(count: width * height * 4) { base in
                guard png_image_finish_read(&image, nil, base, 0, nil) != 0 else { throw error(from: &image) }
            }
            return ImageDecoderOutput(width: width, height: height, pixels: pixels)
        }
    }

    /// Encodes straight-alpha RGBA8 pixels as a PNG in memory.
    static func encode(width: Int, height: Int, pixels: [UInt8]) throws -> Data {
        let (area, areaOverflow) = width.multipliedReportingOverflow(by: height)
        let (byteCount, bytesOverflow) = area.multipliedReportingOverflow(by: 4)
        guard let pngWidth = png_uint_32(exactly: width), let pngHeight = png_uint_32(exactly: height),
              width > 0, height > 0, !areaOverflow, !bytesOverflow, pixels.count == byteCount
        else { throw ImageError.encodingFailed(reason: "\(width) × \(height) is not a valid PNG size.") }
        var image = png_image()
        image.version = CImagePNGImageVersion
        image.width = pngWidth
        image.height = pngHeight
        image.format = CImagePNGFormatRGBA
        defer { png_image_free(&image) }
        return try pixels.withUnsafeBytes { buffer -> Data in
            // First pass measures, second pass writes into a buffer of that size.
            var size: png_alloc_size_t = 0
            guard png_image_write_to_memory(&image, nil, &size, 0, buffer.baseAddress, 0, nil) != 0, size > 0 else {
                throw ImageError.encodingFailed(reason: message(of: &image))
            }
            var output = Data(count: Int(size))
            let written = output.withUnsafeMutableBytes { memory in
                png_image_write_to_memory(&image, memory.baseAddress, &size, 0, buffer.baseAddress, 0, nil)
            }
            guard written != 0 else { throw ImageError.encodingFailed(reason: message(of: &image)) }
            output.count = Int(size)
            return output
        }
    }

    /// Whether every chunk up to `IEND` fits in the data. libpng allocates a chunk's declared
    /// length before reading it (the simplified API cannot lower its unlimited default), so a
    /// 118-byte file declaring a 1.9 GB `tEXt` made it allocate 1.9 GB; data that is all in
    /// memory cannot hold a chunk longer than what remains of it.
    static func chunksFit(_ raw: UnsafeRawBufferPointer) -> Bool {
        var offset = 8  // the signature, checked when the format was recognised
        while offset + 8 <= raw.count {
            let length = (0..<4).reduce(0) { $0 << 8 | Int(raw[offset + $1]) }
            let isEnd = raw[offset + 4] == 0x49 && raw[offset + 5] == 0x45 && raw[offset + 6] == 0x4E
                && raw[offset + 7] == 0x44  // "IEND"
            // Length, type, data and CRC must all be there.
            guard length <= raw.count - offset - 12 else { return false }
            if isEnd { return true }
            offset += 12 + length
        }
        return true  // what is left is too short for a chunk header: libpng reports it
    }

    /// libpng's message, as a truncation when it says the data ran out.
    private static func error(from image: inout png_image) -> ImageError {
        let text = message(of: &image)
        let lowered = text.lowercased()
        if lowered.contains("end of data") || lowered.contains("not enough image data")
            || lowered.contains("read error") || lowered.contains("eof") {
            return .truncated(.png)
        }
        return .corrupt(.png, reason: text.isEmpty ? "libpng rejected the data." : text)
    }

    /// The NUL-terminated text in `png_image.message`.
    private static func message(of image: inout png_image) -> String {
        withUnsafeBytes(of: &image.message) { bytes in
            let text = bytes.prefix { $0 != 0 }
            return String(decoding: text, as: UTF8.self)
        }
    }
}
