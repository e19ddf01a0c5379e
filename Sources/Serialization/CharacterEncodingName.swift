import Foundation

/// Maps IANA charset names (as in `Content-Type: text/plain; charset=…`) to `String.Encoding`.
enum CharacterEncodingName {
    /// Curlew's table of the charsets seen on the web.
    private static let table: [String: String.Encoding] = [
        "utf-8": .utf8, "utf8": .utf8, "unicode-1-1-utf-8": .utf8,
        "us-ascii": .ascii, "ascii": .ascii, "ansi_x3.4-1968": .ascii,
        "iso-8859-1": .isoLatin1, "iso8859-1": .isoLatin1, "iso_8859-1": .isoLatin1, "latin1": .isoLatin1,
        "l1": .isoLatin1,
        "iso-8859-2": .isoLatin2, "iso8859-2": .isoLatin2, "latin2": .isoLatin2,
        "windows-1250": .windowsCP1250, "windows-1251": .windowsCP1251, "windows-1252": .windowsCP1252,
        "cp1252": .windowsCP1252, "windows-1253": .windowsCP1253, "windows-1254": .windowsCP1254,
        "utf-16": .utf16, "utf-16be": .utf16BigEndian, "utf-16le": .utf16LittleEndian,
        "utf-32": .utf32, "utf-32be": .utf32BigEndian, "utf-32le": .utf32LittleEndian,
        "shift_jis": .shiftJIS, "sjis": .shiftJIS, "euc-jp": .japaneseEUC, "iso-2022-jp": .iso2022JP,
        "macintosh": .macOSRoman, "x-mac-roman": .macOSRoman,
    ]

    /// The encoding for a charset name, nil when Curlew does not know it.
    static func encoding(forCharset name: String) -> String.Encoding? {
        table[name.lowercased()]
    }

    /// The charset name to send for an encoding (`Content-Type` parameters), nil when unknown.
    static func charset(for encoding: String.Encoding) -> String? {
        switch encoding {
        case .utf8: return "utf-8"
        case .ascii: return "us-ascii"
        case .isoLatin1: return "iso-8859-1"
        case .isoLatin2: return "iso-8859-2"
        case .windowsCP1252: return "windows-1252"
        case .utf16: return "utf-16"
        case .utf16BigEndian: return "utf-16be"
        case .utf16LittleEndian: return "utf-16le"
        case .shiftJIS: return "shift_jis"
        case .japaneseEUC: return "euc-jp"
        default: return nil
        }
    }
}
