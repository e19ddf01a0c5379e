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

    /// Where the rows libjpeg decodes go in the upright image, for an EXIF orientation.
    ///
    /// The source image is `width` × `height`; the upright one the same, or `height` × `width`
    /// for 5–8, which swap the axes. 1 writes rows in place; 4 writes them bottom up; 2 mirrors
    /// each row in place as soon as it is written, and 3 does both (180°): no second buffer and
    /// no pass over the image. For 5–8 rows are decoded into a band (``bandRows`` of them) and
    /// each band row is spread as a column of the image (`spread`): each image row gets the
    /// band's pixels for it as one contiguous run of `bandRows × 4` bytes.
    struct RowPlacement {
        /// Rows per band for 5–8: each image row receives this many pixels per band as one
        /// run. 16 (one libjpeg batch, 64 bytes per run) was slower than the copy it replaced;
        /// 64 gives 256-byte runs from a band that stays in cache (1 MB at 4000 pixels). The
        /// spreading is bound by memory, not instructions: every band writes into every row
        /// of the image (a read for ownership of each line from DRAM), and a version moving
        /// 4 × 4 blocks through vector registers measured the same within noise.
        static let bandRows = 64
        /// The axes are swapped (5–8): rows go through a band and become columns.
        let transposes: Bool
        /// Rows are reversed in place once written (2, 3).
        let mirrorsRows: Bool
        /// Rows are written bottom up (3, 4).
        let flipsRows: Bool
        /// For 5–8: the source row's image column runs right to left (6, 7), and the source
        /// column's image row runs bottom up (7, 8).
        let columnsReversed: Bool
        let rowsReversed: Bool
        let width: Int
        let height: Int

        init(orientation: Int, width: Int, height: Int) {
            let known = (1...8).contains(orientation) ? orientation : 1
            transposes = known >= 5
            mirrorsRows = known == 2 || known == 3
            flipsRows = known == 3 || known == 4
            columnsReversed = known == 6 || known == 7
            rowsReversed = known == 7 || known == 8
            self.width = width
            self.height = height
        }

        /// The byte where source row `row` starts in the image (orientations 1–4).
        func firstByte(ofRow row: Int) -> Int {
            (flipsRows ? height - 1 - row : row) * width * 4
        }

        /// The distance in bytes from one source row to the next in the image (1–4).
        var rowStride: Int { flipsRows ? -width * 4 : width * 4 }

        /// Places `rows` decoded rows (source rows `first...`) from `band` as columns of the
        /// upright `height` × `width` image at `image` (5–8). Source pixel (sx, sy) goes to
        /// image row `sx` (or `width - 1 - sx`) and column `sy` (or `height - 1 - sy`), as the
        /// EXIF definition of each orientation says.
        func spread(_ band: UnsafeMutablePointer<UInt8>, rows: Int, from first: Int, into image: UnsafeMutablePointer<UInt8>) {
            let source = UnsafeRawPointer(band)
            let target = UnsafeMutableRawPointer(image)
            let rowBytes = width * 4
            let uprightRowBytes = height * 4
            // The image column of the band's first row, and the step to the next band row.
            let column = columnsReversed ? height - 1 - first : first
            let columnStep = columnsReversed ? -1 : 1
            for sx in 0..<width {
                let uprightRow = rowsReversed ? width - 1 - sx : sx
                var destination = uprightRow * uprightRowBytes + column * 4
                var from = sx * 4
                // Whole pixels as raw 4-byte values (the buffers hold UInt8: no rebinding).
                for _ in 0..<rows {
                    target.storeBytes(of: source.loadUnaligned(fromByteOffset: from, as: UInt32.self),
                                      toByteOffset: destination, as: UInt32.self)
                    from += rowBytes
                    destination += columnStep * 4
                }
            }
        }
    }
}
