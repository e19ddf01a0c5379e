import ImageLoading

/// A small picture of an image for a true-colour terminal: each character cell shows two
/// pixels, the upper half block (▀) in the top pixel's colour over the bottom pixel's.
enum ImagePreview {
    /// The preview, at most `maxColumns` wide and `maxRows` lines high, aspect ratio kept.
    /// Transparent pixels are drawn over a dark grey.
    static func render(_ image: Image, maxColumns: Int, maxRows: Int) -> String {
        let small = image.scaled(toFit: (width: maxColumns, height: maxRows * 2))
        guard small.width > 0, small.height > 0, small.pixels.count == small.width * small.height * 4 else { return "" }
        var out = ""
        var y = 0
        while y < small.height {
            for x in 0..<small.width {
                let top = color(small, x, y)
                let bottom = y + 1 < small.height ? color(small, x, y + 1) : nil
                out += "\u{1B}[38;2;\(top.0);\(top.1);\(top.2)m"
                if let bottom { out += "\u{1B}[48;2;\(bottom.0);\(bottom.1);\(bottom.2)m" } else { out += "\u{1B}[49m" }
                out += "▀"
            }
            out += "\u{1B}[0m\n"
            y += 2
        }
        return out
    }

    /// The pixel's colour over dark grey (straight alpha).
    private static func color(_ image: Image, _ x: Int, _ y: Int) -> (Int, Int, Int) {
        let offset = (y * image.width + x) * 4
        let alpha = Int(image.pixels[offset + 3])
        let background = 40
        func blend(_ channel: UInt8) -> Int { (Int(channel) * alpha + background * (255 - alpha)) / 255 }
        return (blend(image.pixels[offset]), blend(image.pixels[offset + 1]), blend(image.pixels[offset + 2]))
    }
}
