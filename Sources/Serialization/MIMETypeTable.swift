/// Curlew's own table from file extensions to MIME types, used to guess the `Content-Type` of
/// multipart file parts (Linux has no system-wide UTI database).
public enum MIMETypeTable {
    /// The MIME type sent when the extension is unknown.
    public static let defaultMIMEType = "application/octet-stream"

    /// Extension (lowercase, without dot) → MIME type.
    private static let table: [String: String] = [
        // Text
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
        "markdown": "text/markdown", "csv": "text/csv", "tsv": "text/tab-separated-values",
        "html": "text/html", "htm": "text/html", "css": "text/css", "js": "text/javascript",
        "mjs": "text/javascript", "xml": "application/xml", "ics": "text/calendar", "vcf": "text/vcard",
        "rtf": "application/rtf", "yaml": "application/yaml", "yml": "application/yaml",
        "toml": "application/toml", "swift": "text/x-swift", "c": "text/x-c", "h": "text/x-c",
        "py": "text/x-python", "sh": "application/x-sh",
        // Data
        "json": "application/json", "geojson": "application/geo+json", "jsonld": "application/ld+json",
        "plist": "application/x-plist", "pdf": "application/pdf", "wasm": "application/wasm",
        "bin": "application/octet-stream", "sqlite": "application/vnd.sqlite3",
        // Archives
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz",
        "7z": "application/x-7z-compressed", "rar": "application/vnd.rar", "zst": "application/zstd",
        // Images
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "jpe": "image/jpeg",
        "gif": "image/gif", "webp": "image/webp", "bmp": "image/bmp", "tif": "image/tiff",
        "tiff": "image/tiff", "ico": "image/vnd.microsoft.icon", "svg": "image/svg+xml",
        "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "jxl": "image/jxl",
        // Audio
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav",
        "ogg": "audio/ogg", "oga": "audio/ogg", "opus": "audio/opus", "flac": "audio/flac",
        "mid": "audio/midi", "midi": "audio/midi", "weba": "audio/webm",
        // Video
        "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm",
        "mkv": "video/x-matroska", "avi": "video/x-msvideo", "mpeg": "video/mpeg", "mpg": "video/mpeg",
        "ogv": "video/ogg", "3gp": "video/3gpp",
        // Fonts
        "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf",
        // Documents
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text",
        "ods": "application/vnd.oasis.opendocument.spreadsheet",
        "epub": "application/epub+zip",
        // Certificates
        "pem": "application/x-pem-file", "crt": "application/x-x509-ca-cert",
        "cer": "application/pkix-cert", "der": "application/x-x509-ca-cert",
    ]

    /// The MIME type for a file extension (with or without a leading dot, any case);
    /// ``defaultMIMEType`` when unknown.
    public static func mimeType(forPathExtension pathExtension: String) -> String {
        var key = pathExtension.lowercased()
        if key.hasPrefix(".") { key.removeFirst() }
        return table[key] ?? defaultMIMEType
    }
}
