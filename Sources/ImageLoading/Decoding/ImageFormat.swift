import Foundation

/// An image format ImageLoading can decode, recognised from the data's first bytes.
///
/// The format is always sniffed from the bytes, never taken from a `Content-Type` header:
/// servers mislabel images often enough (a JPEG served as `image/png`, an HTML error page
/// served as `image/jpeg`) that the header cannot be trusted.
public enum ImageFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Portable Network Graphics (`89 50 4E 47 0D 0A 1A 0A`).
    case png
    /// JPEG / JFIF / EXIF (`FF D8 FF`).
    case jpeg
    /// GIF87a or GIF89a, still or animated.
    case gif
    /// WebP (`RIFF....WEBP`): lossy, lossless, with alpha, animated.
    case webp

    /// The format of `data`, or nil when it is none of the supported ones.
    public init?(sniffing data: Data) {
        let prefix = [UInt8](data.prefix(12))
        if prefix.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            self = .png
        } else if prefix.starts(with: [0xFF, 0xD8, 0xFF]) {
            self = .jpeg
        } else if prefix.starts(with: Array("GIF87a".utf8)) || prefix.starts(with: Array("GIF89a".utf8)) {
            self = .gif
        } else if prefix.count == 12, prefix[0..<4].elementsEqual("RIFF".utf8),
                  prefix[8..<12].elementsEqual("WEBP".utf8) {
            self = .webp
        } else {
            return nil
        }
    }

    /// The format's usual name: "PNG", "JPEG", "GIF", "WebP".
    public var description: String {
        switch self {
        case .png: return "PNG"
        case .jpeg: return "JPEG"
        case .gif: return "GIF"
        case .webp: return "WebP"
        }
    }

    /// A name for data that is not a supported image, to make the error say what arrived
    /// instead (an SVG, an HTML error page…); nil when nothing is recognised.
    static func describeUnsupported(_ data: Data) -> String? {
        let head = [UInt8](data.prefix(512))
        if head.starts(with: Array("BM".utf8)) { return "BMP" }
        if head.starts(with: [0x49, 0x49, 0x2A, 0x00]) || head.starts(with: [0x4D, 0x4D, 0x00, 0x2A]) { return "TIFF" }
        if head.starts(with: [0x00, 0x00, 0x01, 0x00]) { return "ICO" }
        if head.count >= 12, head[4..<8].elementsEqual("ftyp".utf8) { return "HEIF/AVIF" }
        // Text formats: skip a byte-order mark and leading whitespace, then look at the markup.
        let text = String(decoding: head, as: UTF8.self)
            .trimmingCharacters(in: CharacterSet(charactersIn: "\u{FEFF}").union(.whitespacesAndNewlines))
            .lowercased()
        if text.contains("<svg") { return "SVG" }
        if text.hasPrefix("<!doctype html") || text.hasPrefix("<html") || text.contains("<html") { return "HTML" }
        if text.hasPrefix("<?xml") { return "XML" }
        if text.hasPrefix("{") || text.hasPrefix("[") { return "JSON" }
        return nil
    }
}
