import COpenSSL
import Foundation

/// Owns one reference to a parsed OpenSSL `X509`, so a `Certificate` is parsed once and
/// never again on the evaluation path (which runs once per TLS handshake).
///
/// `@unchecked Sendable` is honest here: the pointer is immutable after `init`, the
/// object is only read (OpenSSL guards its own lazily computed caches, such as the
/// extension cache, with an internal lock), and `deinit` drops the one reference we own.
final class X509Handle: @unchecked Sendable {
    /// The `X509*`; valid for the lifetime of this object.
    let pointer: OpaquePointer

    /// Takes ownership of one reference to `pointer` (the caller must not free it).
    init(owning pointer: OpaquePointer) {
        self.pointer = pointer
    }

    /// Adds a reference to a borrowed `X509*` (for example one owned by a TLS handshake).
    /// Returns nil if OpenSSL refuses the up-reference.
    convenience init?(retaining pointer: OpaquePointer) {
        guard X509_up_ref(pointer) == 1 else { return nil }
        self.init(owning: pointer)
    }

    deinit {
        X509_free(pointer)
    }

    /// The DER encoding of the certificate, or nil if OpenSSL cannot encode it.
    func derEncoding() -> Data? {
        let length = i2d_X509(pointer, nil)
        guard length > 0 else { return nil }
        var data = Data(count: Int(length))
        let written = data.withUnsafeMutableBytes { raw -> Int32 in
            guard let base = raw.bindMemory(to: UInt8.self).baseAddress else { return -1 }
            var cursor: UnsafeMutablePointer<UInt8>? = base
            return i2d_X509(pointer, &cursor)
        }
        return written == length ? data : nil
    }

    /// DER of the SubjectPublicKeyInfo: the exact bytes `CURLOPT_PINNEDPUBLICKEY` hashes.
    func subjectPublicKeyInfoDER() -> Data? {
        guard let key = X509_get_X509_PUBKEY(pointer) else { return nil }
        let length = i2d_X509_PUBKEY(key, nil)
        guard length > 0 else { return nil }
        var data = Data(count: Int(length))
        let written = data.withUnsafeMutableBytes { raw -> Int32 in
            guard let base = raw.bindMemory(to: UInt8.self).baseAddress else { return -1 }
            var cursor: UnsafeMutablePointer<UInt8>? = base
            return i2d_X509_PUBKEY(key, &cursor)
        }
        return written == length ? data : nil
    }

    /// SHA-256 of the SubjectPublicKeyInfo DER (32 bytes), or nil on an OpenSSL failure.
    func subjectPublicKeySHA256() -> Data? {
        guard let spki = subjectPublicKeyInfoDER() else { return nil }
        return OpenSSLText.sha256(spki)
    }

    /// The subject's common name, or the whole subject name when it has none.
    func subjectSummary() -> String {
        guard let name = X509_get_subject_name(pointer) else { return "" }
        if let commonName = OpenSSLText.commonName(of: name), !commonName.isEmpty {
            return commonName
        }
        return OpenSSLText.oneLine(name)
    }

    /// The subject name, one line, RFC 2253 style (for error messages).
    func subjectName() -> String {
        guard let name = X509_get_subject_name(pointer) else { return "" }
        return OpenSSLText.oneLine(name)
    }

    /// `notBefore` as a `Date`, or nil if the field cannot be read.
    func notBefore() -> Date? {
        guard let time = X509_get0_notBefore(pointer) else { return nil }
        return OpenSSLText.date(from: time)
    }

    /// `notAfter` as a `Date`, or nil if the field cannot be read.
    func notAfter() -> Date? {
        guard let time = X509_get0_notAfter(pointer) else { return nil }
        return OpenSSLText.date(from: time)
    }

    /// True when the certificate's issuer name equals its subject name and its own key
    /// verifies its signature (a self-signed certificate, root or not).
    func isSelfSigned() -> Bool {
        X509_self_signed(pointer, 1) == 1
    }

    /// True when `issuer` issued this certificate: names and key identifiers agree
    /// (`X509_check_issued`) and `issuer`'s key verifies this certificate's signature.
    func isSigned(by issuer: X509Handle) -> Bool {
        guard X509_check_issued(issuer.pointer, pointer) == X509_V_OK,
              let key = X509_get0_pubkey(issuer.pointer) else { return false }
        return X509_verify(pointer, key) == 1
    }
}
