internal import CImageCodecs
import Foundation

extension GIFDecoder {
    /// Where a frame lies on the canvas, and how much of its LZW data must be decompressed.
    ///
    /// GIF rows are stored top to bottom (or in four interlaced passes) and LZW can only be
    /// decoded in order, so a frame hanging below the canvas is read only up to its last row on
    /// the canvas, and a frame wholly outside it is not decompressed at all. Columns past the
    /// canvas's right edge are decoded with their row, but not drawn.
    struct FrameLayout {
        /// The interlaced passes: every 8th row from 0, every 8th from 4, every 4th from 2,
        /// every 2nd from 1.
        static let interlacePasses: [(start: Int, step: Int)] = [(0, 8), (4, 8), (2, 4), (1, 2)]

        /// The rectangle the frame's descriptor gives.
        let rect: Rect
        let interlaced: Bool
        /// The frame's rows (from its top) that fall on the canvas: 0 when none of it does.
        let visibleRows: Int
        /// The frame's columns (from its left) that fall on the canvas.
        let visibleColumns: Int
        /// How many rows, in file order, must be decompressed to reach every visible row.
        let rowsToRead: Int

        init(rect: Rect, interlaced: Bool, canvasWidth: Int, canvasHeight: Int) {
            self.rect = rect
            self.interlaced = interlaced
            let columns = max(0, min(rect.width, canvasWidth - rect.left))
            let rows = columns > 0 ? max(0, min(rect.height, canvasHeight - rect.top)) : 0
            visibleColumns = rows > 0 ? columns : 0
            visibleRows = rows
            rowsToRead = Self.rowsToRead(height: rect.height, visibleRows: rows, interlaced: interlaced)
        }

        /// Rows read up to and including the last of the first `visibleRows` rows: the last
        /// pass holding one of them ends the reading there.
        static func rowsToRead(height: Int, visibleRows: Int, interlaced: Bool) -> Int {
            guard visibleRows > 0 else { return 0 }
            guard interlaced else { return visibleRows }
            var read = 0, needed = 0
            for pass in interlacePasses {
                let inPass = pass.start < height ? (height - pass.start + pass.step - 1) / pass.step : 0
                let visibleInPass = pass.start < visibleRows ? (visibleRows - pass.start + pass.step - 1) / pass.step : 0
                if visibleInPass > 0 { needed = read + visibleInPass }
                read += inPass
            }
            return needed
        }
    }

    /// The palette of a frame with no colour table and a file with no global one: index i is
    /// grey i, as Pillow shows it (GIF89a leaves the choice to the decoder).
    static let greyPalette: [GifColorType] = (0...255).map { GifColorType(Red: UInt8($0), Green: UInt8($0), Blue: UInt8($0)) }

    /// Decompresses the rows of the current frame that reach the canvas and draws their
    /// opaque pixels; the rest of its LZW data is skipped without being decoded.
    static func drawFrame(
        _ gif: UnsafeMutablePointer<GifFileType>, source: Source, frame: FrameLayout,
        palette: UnsafeBufferPointer<GifColorType>, transparentIndex: Int, canvas: inout [UInt8]
    ) throws {
        let rect = frame.rect
        let canvasWidth = Int(gif.pointee.SWidth)
        let line = UnsafeMutablePointer<GifPixelType>.allocate(capacity: max(1, rect.width))
        defer { line.deallocate() }
        let words = paletteWords(palette, transparentIndex: transparentIndex)
        var remaining = frame.rowsToRead
        let passes = frame.interlaced ? FrameLayout.interlacePasses : [(start: 0, step: 1)]
        try words.withUnsafeBufferPointer { words in
            try canvas.withUnsafeMutableBytes { pixels in
                rows: for pass in passes {
                    for row in stride(from: pass.start, to: rect.height, by: pass.step) {
                        guard remaining > 0 else { break rows }
                        guard DGifGetLine(gif, line, Int32(rect.width)) == CImageGIFOK else {
                            throw failure(code: gif.pointee.Error, source: source)
                        }
                        remaining -= 1
                        guard row < frame.visibleRows else { continue }
                        let rowStart = ((rect.top + row) * canvasWidth + rect.left) * 4
                        guard let base = pixels.baseAddress, let table = words.baseAddress else { continue }
                        // The row's visible pixels lie inside the canvas (FrameLayout clips them),
                        // so the per-pixel offsets cannot overflow: wrapping arithmetic, a raw
                        // pointer, no checks per pixel (this loop ran at twice C's cost).
                        let target = base + rowStart
                        for column in 0..<frame.visibleColumns {
                            // 0 (never an opaque colour, whose alpha byte is 255) leaves the canvas
                            // as it is: the transparent index and indices past the table.
                            let word = table[Int(line[column])]
                            guard word != 0 else { continue }
                            target.storeBytes(of: word, toByteOffset: column &* 4, as: UInt32.self)
                        }
                    }
                }
            }
        }
        // giflib skips the rest of the data itself once the last row was read; otherwise the
        // remaining sub-blocks are passed over raw (their cost bounded by the file's size).
        if frame.rowsToRead == 0 || frame.rowsToRead < rect.height { try skipImageData(gif, source: source) }
    }

    /// The 256 possible indices as RGBA words in memory order (R, G, B, 255), so a pixel is one
    /// 4-byte store; 0 for the transparent index and for indices past the table.
    static func paletteWords(_ palette: UnsafeBufferPointer<GifColorType>, transparentIndex: Int) -> [UInt32] {
        (0..<256).map { index in
            guard index != transparentIndex, index < palette.count else { return 0 }
            let color = palette[index]
            let word = UInt32(color.Red) | UInt32(color.Green) << 8 | UInt32(color.Blue) << 16 | 0xFF00_0000
            return UInt32(littleEndian: word)
        }
    }

    /// Reads the current frame's remaining LZW sub-blocks without decompressing them.
    private static func skipImageData(_ gif: UnsafeMutablePointer<GifFileType>, source: Source) throws {
        var block: UnsafeMutablePointer<GifByteType>?
        repeat {
            guard DGifGetCodeNext(gif, &block) == CImageGIFOK else { throw failure(code: gif.pointee.Error, source: source) }
        } while block != nil
    }
}
