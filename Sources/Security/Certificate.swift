import COpenSSL
import Foundation

/// An X.509 certificate: the unit that Curlew pins and trusts.
///
/// A `Certificate` is a value: two certificates are equal when their DER bytes are equal,
/// and it encodes (`Codable`) as its DER in base64. It is parsed once, when it is created;
/// the parsed form is reused by every evaluation.
///
/// ```swift
/// import Foundation
/// import Security
///
/// func pin(for file: URL) throws -> String {
///     let certificate = try Certificate(contentsOf: file)
///     return certificate.publicKeySHA256   // same base64 form as `CURLOPT_PINNEDPUBLICKEY`
/// }
/// ```
public struct Certificate: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The certificate's DER encoding (what a `.cer` / `.der` file holds).
    public let derData: Data

    /// The parsed certificate; excluded from equality and hashing (it mirrors `derData`).
    let handle: X509Handle

    /// Parses one DER-encoded certificate. The data must be exactly one certificate:
    /// PEM text, garbage, truncated bytes or trailing bytes throw a `CertificateError`.
    public init(derEncoded data: Data) throws {
        guard !data.isEmpty else {
            throw CertificateError(code: .empty, detail: "0 bytes")
        }
        if Certificate.looksLikePEM(data) {
            throw CertificateError(
                code: .pemWhereDERExpected,
                detail: "the data starts with a '-----BEGIN' line; use init(pemEncoded:)")
        }
        ERR_clear_error()
        var consumed = 0
        let parsed: OpaquePointer? = data.withUnsafeBytes { raw in
            guard let base = raw.bindMemory(to: UInt8.self).baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            let x509 = d2i_X509(nil, &cursor, raw.count)
            if let cursor { consumed = cursor - base }
            return x509
        }
        guard let parsed else {
            let openssl = OpenSSLText.drainErrorQueue()
            throw CertificateError(
                code: .malformedDER,
                detail: "\(data.count) bytes; OpenSSL: \(openssl.isEmpty ? "parse failed" : openssl)")
        }
        let handle = X509Handle(owning: parsed)
        guard consumed == data.count else {
            throw CertificateError(
                code: .trailingData,
                detail: "certificate is \(consumed) bytes, input is \(data.count) bytes")
        }
        try self.init(handle: handle, derData: data)
    }

    /// Parses the first `CERTIFICATE` block of PEM text. Other blocks (a private key, say)
    /// are skipped; text without a certificate block, or with a broken one, throws.
    public init(pemEncoded text: String) throws {
        let all = try Certificate.certificates(pemEncoded: text)
        guard let first = all.first else {
            // `certificates(pemEncoded:)` throws rather than return nothing; kept for safety.
            throw CertificateError(code: .noCertificateInPEM, detail: "no certificate found")
        }
        self = first
    }

    /// Wraps an already parsed certificate (the engine's path: no DER round trip).
    /// Throws when OpenSSL cannot encode it or its validity dates are unreadable.
    init(handle: X509Handle, derData: Data? = nil) throws {
        guard let der = derData ?? handle.derEncoding() else {
            throw CertificateError(code: .malformedDER, detail: "OpenSSL could not encode the certificate")
        }
        guard handle.notBefore() != nil, handle.notAfter() != nil else {
            throw CertificateError(code: .malformedDER, detail: "unreadable validity dates")
        }
        self.derData = der
        self.handle = handle
    }

    /// Every `CERTIFICATE` block in PEM text, in order (for chain and CA-bundle files).
    /// Throws when there is none, or when any certificate block is broken.
    public static func certificates(pemEncoded text: String) throws -> [Certificate] {
        guard !text.isEmpty else { throw CertificateError(code: .empty, detail: "empty text") }
        let utf8 = Array(text.utf8)
        ERR_clear_error()
        let certificates: [Certificate] = try utf8.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
                throw CertificateError(code: .malformedPEM, detail: "could not create a memory BIO")
            }
            defer { BIO_free(bio) }
            var found: [Certificate] = []
            while let x509 = PEM_read_bio_X509(bio, nil, nil, nil) {
                found.append(try Certificate(handle: X509Handle(owning: x509)))
            }
            // OpenSSL ends every successful read loop with "no start line"; anything
            // else means a certificate block was damaged.
            let last = ERR_peek_last_error()
            let cleanEnd = last == 0
                || (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE)
            if !cleanEnd {
                throw CertificateError(code: .malformedPEM, detail: "OpenSSL: \(OpenSSLText.drainErrorQueue())")
            }
            ERR_clear_error()
            return found
        }
        guard !certificates.isEmpty else {
            if text.contains("-----BEGIN CERTIFICATE-----") {
                throw CertificateError(code: .malformedPEM, detail: "the CERTIFICATE block could not be decoded")
            }
            let labels = Certificate.pemLabels(in: text)
            let detail = labels.isEmpty
                ? "no '-----BEGIN CERTIFICATE-----' line"
                : "found only: \(labels.joined(separator: ", "))"
            throw CertificateError(code: .noCertificateInPEM, detail: detail)
        }
        return certificates
    }

    /// The subject's common name (falling back to the whole subject name), as shown to people.
    public var subjectSummary: String { handle.subjectSummary() }

    /// The subject distinguished name on one line (RFC 2253 order).
    public var subjectName: String { handle.subjectName() }

    /// Start of the validity period.
    public var notValidBefore: Date { handle.notBefore() ?? .distantFuture }

    /// End of the validity period.
    public var notValidAfter: Date { handle.notAfter() ?? .distantPast }

    /// Base64 of the SHA-256 of the DER SubjectPublicKeyInfo: the HPKP `pin-sha256` value,
    /// and what follows `sha256//` in `CURLOPT_PINNEDPUBLICKEY`.
    public var publicKeySHA256: String { handle.subjectPublicKeySHA256()?.base64EncodedString() ?? "" }

    /// The subject summary and validity, for logs.
    public var description: String {
        "Certificate(\(subjectSummary), \(notValidBefore) – \(notValidAfter), pin sha256//\(publicKeySHA256))"
    }

    /// Equal when the DER bytes are equal.
    public static func == (lhs: Certificate, rhs: Certificate) -> Bool {
        lhs.derData == rhs.derData
    }

    /// Hashes the DER bytes.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(derData)
    }

    /// Decodes the base64 DER written by `encode(to:)`; the certificate must parse.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let base64 = try container.decode(String.self)
        guard let der = Data(base64Encoded: base64) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "certificate is not base64")
        }
        do {
            try self.init(derEncoded: der)
        } catch let error as CertificateError {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    /// Encodes the DER bytes as one base64 string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(derData.base64EncodedString())
    }

    /// True when the bytes begin (after optional whitespace) with a PEM armour line.
    static func looksLikePEM(_ data: Data) -> Bool {
        let marker = Array("-----BEGIN".utf8)
        let start = data.prefix(64).drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0xEF || $0 == 0xBB || $0 == 0xBF }
        return start.starts(with: marker)
    }

    /// The labels of the PEM blocks in `text` ("PRIVATE KEY", "CERTIFICATE REQUEST", ...).
    private static func pemLabels(in text: String) -> [String] {
        text.split(whereSeparator: \.isNewline).compactMap { line in
            guard line.hasPrefix("-----BEGIN "), line.hasSuffix("-----") else { return nil }
            return String(line.dropFirst("-----BEGIN ".count).dropLast("-----".count))
        }
    }
}
