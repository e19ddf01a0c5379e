import Foundation

extension JPEGDecoder {
    /// The EXIF orientation (1...8; 1 when absent or unreadable) from the first APP1 "Exif"
    /// segment before the scan, read as bytes with every offset bounds-checked.
    static func exifOrientation(in data: Data) -> Int {
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Int in
            var position = 2  // after SOI
            while position + 4 <= bytes.count {
                guard bytes[position] == 0xFF else { return 1 }
                let marker = bytes[position + 1]
                if marker == 0xFF { position += 1; continue }  // fill byte
                if marker == 0xDA || marker == 0xD9 { return 1 }  // start of scan / end: no EXIF
                if marker == 0x01 || (0xD0...0xD7).contains(marker) { position += 2; continue }
                let length = Int(bytes[position + 2]) << 8 | Int(bytes[position + 3])
                guard length >= 2 else { return 1 }
                let start = position + 4
                let end = position + 2 + length
                guard end <= bytes.count else { return 1 }
                if marker == 0xE1, end - start > 6,
                   bytes[start..<start + 6].elementsEqual([0x45, 0x78, 0x69, 0x66, 0, 0]) {
                    return tiffOrientation(UnsafeRawBufferPointer(rebasing: bytes[start + 6..<end])) ?? 1
                }
                position = end
            }
            return 1
        }
    }

    /// Tag 0x0112 of IFD0 in a TIFF header, when it holds a valid orientation.
    private static func tiffOrientation(_ tiff: UnsafeRawBufferPointer) -> Int? {
        guard tiff.count >= 8 else { return nil }
        let littleEndian: Bool
        switch (tiff[0], tiff[1]) {
        case (0x49, 0x49): littleEndian = true
        case (0x4D, 0x4D): littleEndian = false
        default: return nil
        }
        func read16(_ offset: Int) -> Int? {
            guard offset >= 0, offset + 2 <= tiff.count else { return nil }
            let (a, b) = (Int(tiff[offset]), Int(tiff[offset + 1]))
            return littleEndian ? a | b << 8 : a << 8 | b
        }
        func read32(_ offset: Int) -> Int? {
            guard let first = read16(offset), let second = read16(offset + 2) else { return nil }
            return littleEndian ? first | second << 16 : first << 16 | second
        }
        guard read16(2) == 42, let ifd = read32(4), let count = read16(ifd) else { return nil }
        for index in 0..<count {
            let entry = ifd + 2 + index * 12
            guard let tag = read16(entry) else { return nil }
            guard tag == 0x0112 else { continue }
            // SHORT (type 3), one value, stored in the first two bytes of the value field.
            guard read16(entry + 2) == 3, let value = read16(entry + 8), (1...8).contains(value) else { return nil }
            return value
        }
        return nil
    }

    /// The pixels turned upright for EXIF `orientation` (2–8 mirror and/or rotate; 5–8 swap
    /// width and height), into a buffer that is not zero-filled first: every pixel is written.
    /// `decode` calls it for 5–8 only: it applies 2–4 itself as libjpeg writes the rows.
    static func orient(_ image: ImageDecoderOutput, _ orientation: Int) -> ImageDecoderOutput {
        guard (2...8).contains(orientation) else { return image }
        let (width, height) = (image.width, image.height)
        let (outWidth, outHeight) = orientation >= 5 ? (height, width) : (width, height)
        // The source pixel shown at upright (x, y) is `origin + y * rowStep + x * columnStep`
        // (in pixels): one affine map per orientation instead of a switch per pixel.
        let (origin, rowStep, columnStep): (Int, Int, Int)
        switch orientation {
        case 2: (origin, rowStep, columnStep) = (width - 1, width, -1)
        case 3: (origin, rowStep, columnStep) = (width * height - 1, -width, -1)
        case 4: (origin, rowStep, columnStep) = ((height - 1) * width, -width, 1)
        case 5: (origin, rowStep, columnStep) = (0, 1, width)
        case 6: (origin, rowStep, columnStep) = ((height - 1) * width, 1, -width)
        case 7: (origin, rowStep, columnStep) = ((height - 1) * width + width - 1, -1, -width)
        default: (origin, rowStep, columnStep) = (width - 1, -1, width)  // 8
        }
        let result = image.pixels.withUnsafeBytes { source in
            [UInt8].decodedPixels(count: image.pixels.count) { target in
                let destination = UnsafeMutableRawPointer(target)
                // Tiles of 64 × 64 pixels: a rotation reads the source down its columns, and a
                // tile keeps those rows in cache instead of one cache miss per pixel.
                let tile = 64
                for tileY in stride(from: 0, to: outHeight, by: tile) {
                    for tileX in stride(from: 0, to: outWidth, by: tile) {
                        for y in tileY..<min(tileY + tile, outHeight) {
                            var sourceIndex = origin + y * rowStep + tileX * columnStep
                            // Each RGBA pixel moved as one 4-byte value, read and written as
                            // raw bytes (the buffers hold UInt8: binding them to UInt32 would
                            // be undefined behaviour).
                            for x in tileX..<min(tileX + tile, outWidth) {
                                let pixel = source.loadUnaligned(fromByteOffset: sourceIndex * 4, as: UInt32.self)
                                destination.storeBytes(of: pixel, toByteOffset: (y * outWidth + x) * 4, as: UInt32.self)
                                sourceIndex += columnStep
                            }
                        }
                    }
                }
            }
        }
        return ImageDecoderOutput(width: outWidth, height: outHeight, pixels: result)
    }
}
