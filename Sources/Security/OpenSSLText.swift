import COpenSSL
import Foundation

/// Small conversions between OpenSSL values and Swift ones (names, times, digests,
/// error queue). Kept in one place so every caller frees what OpenSSL allocates.
enum OpenSSLText {
    /// SHA-256 of `data` through the EVP interface (the one-shot `SHA256` is fine too,
    /// but EVP is the interface OpenSSL 3 keeps undeprecated everywhere).
    static func sha256(_ data: Data) -> Data? {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = data.withUnsafeBytes { raw -> Int32 in
            EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_sha256(), nil)
        }
        guard ok == 1, length == 32 else { return nil }
        return Data(digest.prefix(Int(length)))
    }

    /// The last common name in `name`, decoded as UTF-8; nil when there is none.
    static func commonName(of name: OpaquePointer) -> String? {
        // The most specific CN is the last one, as browsers display it.
        var index: Int32 = -1
        var last: Int32 = -1
        while true {
            index = X509_NAME_get_index_by_NID(name, NID_commonName, index)
            if index < 0 { break }
            last = index
        }
        guard last >= 0,
              let entry = X509_NAME_get_entry(name, last),
              let value = X509_NAME_ENTRY_get_data(entry) else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, value)
        guard length >= 0, let utf8 else { return nil }
        defer { curlew_ossl_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }

    /// `name` on one line, RFC 2253 order with UTF-8 kept readable.
    static func oneLine(_ name: OpaquePointer) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        let flags = curlew_ossl_name_flags_rfc2253_utf8()
        guard X509_NAME_print_ex(bio, name, 0, flags) >= 0 else { return "" }
        return string(fromMemoryBIO: bio)
    }

    /// The bytes written so far to a memory BIO, as UTF-8 text.
    static func string(fromMemoryBIO bio: OpaquePointer) -> String {
        var bytes: UnsafeMutablePointer<CChar>?
        let count = curlew_ossl_BIO_get_mem_data(bio, &bytes)
        guard count > 0, let bytes else { return "" }
        return bytes.withMemoryRebound(to: UInt8.self, capacity: Int(count)) {
            String(decoding: UnsafeBufferPointer(start: $0, count: Int(count)), as: UTF8.self)
        }
    }

    /// Converts an ASN.1 UTCTime / GeneralizedTime to a `Date` (UTC).
    static func date(from time: UnsafePointer<ASN1_TIME>) -> Date? {
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        let seconds = timegm(&parts)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Drains OpenSSL's per-thread error queue into one line; empty when it was empty.
    /// Draining matters: a stale entry would otherwise surface in an unrelated later call.
    static func drainErrorQueue() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let message = buffer.withUnsafeBufferPointer { pointer in
                String(decoding: UnsafeRawBufferPointer(pointer).prefix { $0 != 0 }, as: UTF8.self)
            }
            messages.append(message)
        }
        return messages.joined(separator: "; ")
    }

    /// OpenSSL's text for an `X509_V_ERR_*` verification result.
    static func verifyErrorString(_ code: Int32) -> String {
        guard let text = X509_verify_cert_error_string(Int(code)) else { return "error \(code)" }
        return String(cString: text)
    }
}
