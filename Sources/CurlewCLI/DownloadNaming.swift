import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The file name a download is saved under, from `Content-Disposition` or the URL.
///
/// What a server suggests is only a name: any directory part, leading dots, control
/// characters and anything but the last path component are dropped, so the file always
/// lands in the directory curlew was asked to write to, as a visible file.
enum DownloadNaming {
    /// The sanitised name for a response with this `Content-Disposition` and MIME type, or
    /// from the URL's last path component; "index" (with an extension for the type) when
    /// neither gives one.
    static func fileName(contentDisposition: String?, url: URL, mimeType: String?) -> String {
        if let header = contentDisposition, let suggested = filename(fromContentDisposition: header),
            let clean = sanitize(suggested)
        {
            return clean
        }
        var name = sanitize(url.lastPathComponent) ?? "index"
        if !name.contains("."), let mimeType, let ext = extensions[mimeType] { name += "." + ext }
        return name
    }

    private static let extensions = [
        "application/json": "json", "text/html": "html", "text/plain": "txt", "image/png": "png", "image/jpeg": "jpg",
        "image/gif": "gif", "image/webp": "webp", "application/xml": "xml", "text/xml": "xml",
        "application/octet-stream": "bin", "application/pdf": "pdf", "text/css": "css", "application/javascript": "js",
    ]

    /// The `filename*` (RFC 6266/8187, UTF-8 percent-encoded) or `filename` parameter.
    static func filename(fromContentDisposition header: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in parameters(header) {
            let key = parameter.key.lowercased()
            if key == "filename*" {
                // charset'language'percent-encoded
                let parts = parameter.value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
                if parts.count == 3, let bytes = percentDecoded(parts[2]) {
                    // The bytes in the charset named (RFC 8187 §3.2.1: UTF-8 or ISO-8859-1);
                    // bytes that are not what it says leave the plain `filename`.
                    switch parts[0].lowercased() {
                    case "utf-8": extended = String(validating: bytes, as: UTF8.self)
                    case "iso-8859-1": extended = String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
                    default: break
                    }
                }
            } else if key == "filename" {
                plain = parameter.value
            }
        }
        // An extended name that sanitises to nothing (empty, "..") leaves the plain one.
        if let extended, sanitize(extended) != nil { return extended }
        return plain
    }

    /// The bytes of a percent-encoded value (nil when a `%` is not followed by two hex digits).
    private static func percentDecoded(_ value: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = value.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte < 0x80 else { return nil }  // RFC 8187: raw characters are ASCII only
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The `;`-separated `key=value` parameters after the disposition type; quoted values
    /// unquoted (a backslash escapes the next character).
    private static func parameters(_ header: String) -> [(key: String, value: String)] {
        var result: [(String, String)] = []
        var characters = Substring(header)
        guard let firstSemicolon = characters.firstIndex(of: ";") else { return [] }
        characters = characters[characters.index(after: firstSemicolon)...]
        while !characters.isEmpty {
            characters = characters.drop { $0 == " " || $0 == "\t" || $0 == ";" }
            guard let equals = characters.firstIndex(of: "=") else { break }
            let key = characters[..<equals].trimmingCharacters(in: .whitespaces)
            characters = characters[characters.index(after: equals)...].drop { $0 == " " }
            var value = ""
            if characters.first == "\"" {
                characters = characters.dropFirst()
                while let character = characters.first, character != "\"" {
                    characters = characters.dropFirst()
                    if character == "\\", let escaped = characters.first {
                        value.append(escaped)
                        characters = characters.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
                characters = characters.dropFirst()
                characters = characters.drop { $0 != ";" }
            } else {
                let end = characters.firstIndex(of: ";") ?? characters.endIndex
                value = characters[..<end].trimmingCharacters(in: .whitespaces)
                characters = characters[end...]
            }
            result.append((key, value))
        }
        return result
    }

    /// The last path component (either slash), without control characters and leading dots
    /// or spaces, at most 200 bytes; nil when nothing is left.
    static func sanitize(_ name: String) -> String? {
        let last = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var clean = String(String.UnicodeScalarView(last.unicodeScalars.filter { scalar in
            !(scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value))
        }))
        while let first = clean.first, first == "." || first == " " || first == "-" { clean.removeFirst() }
        clean = clean.trimmingCharacters(in: .whitespaces)
        while clean.utf8.count > 200 { clean.removeLast() }
        // Names curlew gives its own files (resume data, Curlew's partial files) are never a
        // server's to choose: `--continue` would read them.
        if clean.hasSuffix(".curlew-resume") { clean += ".txt" }
        if clean.hasPrefix("CurlewDownload-") { clean = "_" + clean }
        return clean.isEmpty ? nil : clean
    }

    /// `name` in `directory`, or `name-1`, `name-2`, ... for the first that does not exist
    /// (HTTPie's rule). The move that follows never replaces a file either: this only picks.
    static func unusedName(_ name: String, in directory: URL, exists: (URL) -> Bool = fileExists) -> URL {
        var candidate = directory.appendingPathComponent(name)
        var suffix = 1
        while exists(candidate), suffix < 10_000 {
            candidate = directory.appendingPathComponent("\(name)-\(suffix)")
            suffix += 1
        }
        return candidate
    }

    /// Whether anything (a link included) is at `url`.
    static func fileExists(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0
    }
}
