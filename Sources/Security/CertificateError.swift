import Foundation

/// Why bytes, text or a file could not be read as an X.509 certificate.
///
/// The description names the file (when there is one) and what was wrong with it, so a
/// misconfigured pin file is found from the error message alone.
public struct CertificateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of input problem this is.
    public enum Code: String, Sendable, Hashable, Codable {
        /// The input was empty.
        case empty
        /// The bytes are not a DER-encoded X.509 certificate (garbage, or truncated).
        case malformedDER
        /// A certificate parsed, but bytes followed it (DER must be exactly one certificate).
        case trailingData
        /// PEM text was given where DER bytes were expected.
        case pemWhereDERExpected
        /// The text holds no `-----BEGIN CERTIFICATE-----` block (maybe a key or a CSR).
        case noCertificateInPEM
        /// A `CERTIFICATE` block is there, but its base64 or its DER content is broken.
        case malformedPEM
        /// The file could not be read (missing, a directory, permissions).
        case unreadableFile
    }

    /// The kind of problem.
    public let code: Code
    /// The file the input came from, when it came from a file.
    public let file: URL?
    /// What was found, in words (including OpenSSL's own message when it gave one).
    public let detail: String

    /// Creates an error; `file` is nil for in-memory input.
    public init(code: Code, file: URL? = nil, detail: String) {
        self.code = code
        self.file = file
        self.detail = detail
    }

    /// The same error, attributed to `file`.
    func attributed(to file: URL) -> CertificateError {
        CertificateError(code: code, file: file, detail: detail)
    }

    /// One line: the file (if any), the problem, the detail.
    public var description: String {
        let place = file.map { "\($0.path): " } ?? ""
        return "\(place)\(summary) (\(detail))"
    }

    private var summary: String {
        switch code {
        case .empty: "no certificate data"
        case .malformedDER: "not a DER-encoded X.509 certificate"
        case .trailingData: "unexpected bytes after the DER certificate"
        case .pemWhereDERExpected: "PEM text where DER bytes were expected"
        case .noCertificateInPEM: "no CERTIFICATE block in the PEM text"
        case .malformedPEM: "broken PEM CERTIFICATE block"
        case .unreadableFile: "cannot read certificate file"
        }
    }
}
