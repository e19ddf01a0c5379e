import Foundation

/// Reading certificates from files: one file, a list of files, or one folder.
extension Certificate {
    /// File name extensions `certificates(inDirectory:)` picks up (compared case-insensitively).
    public static let fileExtensions: Set<String> = ["cer", "der", "pem", "crt"]

    /// Largest file the loaders read (16 MiB; a full CA bundle is about 200 KB).
    public static let maximumFileSize = 16 << 20

    /// Reads the first certificate in a file, PEM or DER (chosen by content, not by name:
    /// `.crt` and `.cer` files come both ways in the wild). Errors name the file.
    public init(contentsOf url: URL) throws {
        let all = try Certificate.certificates(contentsOf: url)
        guard let first = all.first else {
            throw CertificateError(code: .empty, file: url, detail: "no certificate in the file")
        }
        self = first
    }

    /// Every certificate in one file: one for DER, all `CERTIFICATE` blocks for PEM.
    /// Errors name the file.
    public static func certificates(contentsOf url: URL) throws -> [Certificate] {
        // Checked before reading: an empty file gets its own error (and Foundation's
        // reader is not asked for zero bytes), an oversized one is not read at all.
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue
        if size == 0 {
            throw CertificateError(code: .empty, file: url, detail: "the file is empty")
        }
        if let size, size > maximumFileSize {
            throw CertificateError(code: .unreadableFile, file: url, detail: "\(size) bytes is too large for a certificate file")
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw CertificateError(code: .unreadableFile, file: url, detail: error.localizedDescription)
        }
        do {
            if looksLikePEM(data) {
                guard let text = String(data: data, encoding: .utf8) else {
                    throw CertificateError(code: .malformedPEM, detail: "PEM file is not UTF-8 text")
                }
                return try certificates(pemEncoded: text)
            }
            return [try Certificate(derEncoded: data)]
        } catch let error as CertificateError {
            throw error.attributed(to: url)
        }
    }

    /// Every certificate in the files at `paths`, in order. The first bad file stops the
    /// read with a `CertificateError` that names it (use this to load pins: a pin file
    /// that silently fails to load is a pin that silently is not there).
    public static func certificates(atPaths paths: [String]) throws -> [Certificate] {
        var result: [Certificate] = []
        for path in paths {
            result += try certificates(contentsOf: URL(fileURLWithPath: path))
        }
        return result
    }

    /// The certificates in one folder (not its subfolders), from files ending `.cer`,
    /// `.der`, `.pem` or `.crt`. Files that cannot be read or parsed are skipped, as
    /// AFNetworking's `certificatesInBundle:` does; use `certificates(inDirectory:reportingErrors:)`
    /// or `certificates(atPaths:)` to be told about them.
    public static func certificates(inDirectory directory: URL) -> Set<Certificate> {
        (try? certificates(inDirectory: directory, reportingErrors: false)) ?? []
    }

    /// The certificates in one folder (not its subfolders), like `certificates(inDirectory:)`,
    /// but when `reportingErrors` is true an unreadable folder or bad file throws a
    /// `CertificateError` naming it.
    public static func certificates(inDirectory directory: URL, reportingErrors: Bool) throws -> Set<Certificate> {
        let entries: [URL]
        do {
            entries = try FileManager.default.contentsOfDirectory(
                at: directory, includingPropertiesForKeys: nil, options: [])
        } catch {
            if reportingErrors {
                throw CertificateError(code: .unreadableFile, file: directory, detail: error.localizedDescription)
            }
            return []
        }
        var result: Set<Certificate> = []
        // Sorted so that the first error reported is the same on every run.
        for url in entries.sorted(by: { $0.lastPathComponent < $1.lastPathComponent })
        where fileExtensions.contains(url.pathExtension.lowercased()) {
            // fileExists follows symbolic links, so a linked certificate counts as a file.
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory),
                  !isDirectory.boolValue else { continue }
            do {
                result.formUnion(try certificates(contentsOf: url))
            } catch {
                if reportingErrors { throw error }
            }
        }
        return result
    }
}
