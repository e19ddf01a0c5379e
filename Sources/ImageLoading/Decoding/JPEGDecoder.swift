internal import CImageCodecs
import Foundation

/// JPEG through libjpeg(-turbo): every step runs under the C shim's setjmp, so a fatal
/// libjpeg error comes back as a return code instead of ending the process.
enum JPEGDecoder {
    /// The reduced scales libjpeg can decode at directly (1/denominator), largest reduction first.
    private static let scaleDenominators = [8, 4, 2]

    /// Decodes a baseline or progressive JPEG (YCbCr, greyscale, RGB, CMYK/YCCK) to upright RGBA8.
    static func decode(_ data: Data, options: Image.DecodingOptions) throws -> ImageDecoderOutput {
        let orientation = exifOrientation(in: data)
        guard let decoder = cimage_jpeg_create() else {
            throw ImageError.corrupt(.jpeg, reason: "libjpeg could not allocate a decompressor.")
        }
        defer { cimage_jpeg_destroy(decoder) }
        let output = try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> ImageDecoderOutput in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { throw ImageError.emptyData }
            try step(decoder, cimage_jpeg_read_header(decoder, base, UInt(raw.count)))
            // Every scan costs a pass over the blocks it covers, whatever it holds: a file of
            // thousands of (even empty) scans would take seconds of CPU within the pixel budget.
            cimage_jpeg_set_scan_limit(decoder, Int32(Image.DecodingOptions.maximumJPEGScanCount))
            let info = cimage_jpeg_info(decoder)
            let sourceWidth = Int(info.pointee.image_width)
            let sourceHeight = Int(info.pointee.image_height)
            // A multi-scan JPEG (progressive, or a baseline file whose components come in
            // separate scans) makes libjpeg buffer coefficients for the whole source image
            // whatever the output scale: it must fit the budget at full size. (Called right
            // after a successful jpeg_read_header, the state it requires: it cannot fail.)
            if jpeg_has_multiple_scans(info) != 0 {
                try options.checkBudget(width: sourceWidth, height: sourceHeight, format: .jpeg)
            }
            // Backstop for libjpeg's own allocations (it has no backing store: beyond this it fails).
            let (memoryLimit, overflow) = options.pixelBudget.multipliedReportingOverflow(by: 8)
            info.pointee.mem.pointee.max_memory_to_use = overflow ? Int.max : memoryLimit
            let denominator = scaleDenominator(width: sourceWidth, height: sourceHeight, target: options.targetPixelSize)
            info.pointee.scale_num = 1
            info.pointee.scale_denom = UInt32(denominator)
            let colorSpace = info.pointee.jpeg_color_space
            let isCMYK = colorSpace == JCS_CMYK || colorSpace == JCS_YCCK
            info.pointee.out_color_space = isCMYK ? JCS_CMYK : JCS_EXT_RGBA
            try step(decoder, cimage_jpeg_calc_output_dimensions(decoder))
            let width = Int(info.pointee.output_width)
            let height = Int(info.pointee.output_height)
            try options.checkBudget(width: width, height: height, format: .jpeg)
            try step(decoder, cimage_jpeg_start(decoder))
            // A progressive file's scans are all read by the start: one cut short is known now,
            // before its full-size buffer exists.
            if cimage_jpeg_hit_end_of_data(decoder) != 0 { throw ImageError.truncated(.jpeg) }
            let invertedCMYK = info.pointee.saw_Adobe_marker != 0
            // Decoded straight into the image's own buffer, a batch of rows per libjpeg call;
            // every row is written (libjpeg pads a cut-off stream), so no zero-fill first. The
            // EXIF orientation is applied on the way, with no second full-size buffer and no
            // pass over the finished image (`RowPlacement`).
            let placement = RowPlacement(orientation: orientation, width: width, height: height)
            let pixels = try [UInt8].decodedPixels(count: width * height * 4) { pixelBase in
                let rowBytes = width * 4
                // Orientations 5–8 swap the axes: rows are decoded into this scratch band, and
                // once it is full each of its rows becomes a column of the image. 64 rows (1 MB
                // for a 4000-pixel row): each image row then gets 256 contiguous bytes per band.
                let bandRows = min(RowPlacement.bandRows, height)  // a short, wide image: no more than it has
                let band = placement.transposes ? UnsafeMutablePointer<UInt8>.allocate(capacity: bandRows * rowBytes) : nil
                defer { band?.deallocate() }
                var row = 0
                var bandStart = 0  // the source row the band's first row is
                while row < height {
                    var produced: UInt32 = 0
                    let target = band.map { $0 + (row - bandStart) * rowBytes } ?? pixelBase + placement.firstByte(ofRow: row)
                    let stride = band == nil ? placement.rowStride : rowBytes
                    let room = band == nil ? height - row : min(height - row, bandStart + bandRows - row)
                    let wanted = UInt32(min(room, Int(CIMAGE_JPEG_MAX_ROWS)))
                    try step(decoder, cimage_jpeg_read_rows(decoder, target, stride, wanted, &produced))
                    guard produced > 0, produced <= wanted else {
                        throw ImageError.corrupt(.jpeg, reason: "libjpeg stopped after \(row) of \(height) rows.")
                    }
                    // libjpeg pads the rows after the end of the data with grey: a stream cut
                    // short ends the decode at the batch that ran out, not after decoding (and
                    // faulting in) every padded row of a header that announced 8192 × 8192.
                    if cimage_jpeg_hit_end_of_data(decoder) != 0 { throw ImageError.truncated(.jpeg) }
                    for offset in 0..<Int(produced) {
                        let line = target + offset * stride
                        if isCMYK { convertCMYKRow(line, width: width, inverted: invertedCMYK) }
                        if placement.mirrorsRows { mirrorRow(line, width: width) }
                    }
                    row += Int(produced)
                    if let band, row == height || row == bandStart + bandRows {
                        placement.spread(band, rows: row - bandStart, from: bandStart, into: pixelBase)
                        bandStart = row
                    }
                }
            }
            try step(decoder, cimage_jpeg_finish(decoder))
            // libjpeg pads a stream that ends early with grey; a cut-off download is an error.
            if cimage_jpeg_hit_end_of_data(decoder) != 0 { throw ImageError.truncated(.jpeg) }
            let (uprightWidth, uprightHeight) = placement.transposes ? (height, width) : (width, height)
            return ImageDecoderOutput(width: uprightWidth, height: uprightHeight, pixels: pixels)
        }
        return output
    }

    /// Reverses the order of the `width` RGBA pixels at `row`, in place.
    private static func mirrorRow(_ row: UnsafeMutablePointer<UInt8>, width: Int) {
        let raw = UnsafeMutableRawPointer(row)
        var left = 0, right = width - 1
        while left < right {
            // Whole pixels as raw 4-byte values (the buffer holds UInt8: no rebinding).
            let a = raw.loadUnaligned(fromByteOffset: left * 4, as: UInt32.self)
            let b = raw.loadUnaligned(fromByteOffset: right * 4, as: UInt32.self)
            raw.storeBytes(of: b, toByteOffset: left * 4, as: UInt32.self)
            raw.storeBytes(of: a, toByteOffset: right * 4, as: UInt32.self)
            left += 1
            right -= 1
        }
    }

    /// The largest reduction whose result still has a longer side of at least `target`.
    static func scaleDenominator(width: Int, height: Int, target: Int?) -> Int {
        guard let target else { return 1 }
        let longest = max(width, height)
        for denominator in scaleDenominators where (longest + denominator - 1) / denominator >= target {
            return denominator
        }
        return 1
    }

    /// Throws the ImageError for a failed shim step (non-zero `status`).
    private static func step(_ decoder: OpaquePointer, _ status: Int32) throws {
        guard status != 0 else { return }
        if cimage_jpeg_scan_limit_exceeded(decoder) != 0 {
            let limit = Image.DecodingOptions.maximumJPEGScanCount
            throw ImageError.corrupt(.jpeg, reason: "it has more than \(limit) scans (an encoder writes about 10); "
                + "decoding stops there to bound its CPU time.")
        }
        if cimage_jpeg_hit_end_of_data(decoder) != 0 { throw ImageError.truncated(.jpeg) }
        let message = String(cString: cimage_jpeg_message(decoder))
        throw ImageError.corrupt(.jpeg, reason: message.isEmpty ? "libjpeg rejected the data." : message)
    }

    /// CMYK (or YCCK converted by libjpeg) to RGBA in place; Adobe's files store inverted ink.
    private static func convertCMYKRow(_ row: UnsafeMutablePointer<UInt8>, width: Int, inverted: Bool) {
        for x in 0..<width {
            let pixel = row + x * 4
            var c = Int(pixel[0]), m = Int(pixel[1]), y = Int(pixel[2]), k = Int(pixel[3])
            if !inverted { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k }
            // Now 255 means no ink: each channel is what the ink lets through, times what K does.
            pixel[0] = UInt8((c * k + 127) / 255)
            pixel[1] = UInt8((m * k + 127) / 255)
            pixel[2] = UInt8((y * k + 127) / 255)
            pixel[3] = 255
        }
    }
}
