import COpenSSL
import Foundation

/// Checks a certificate against a host name or IP address with OpenSSL's own matchers.
///
/// - DNS names: `X509_check_host` with `X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS` (a wildcard
///   is a whole left-most label: `*.example.com`, never `w*.example.com`) and
///   `X509_CHECK_FLAG_NEVER_CHECK_SUBJECT` (subjectAltName only, no common-name fallback,
///   as browsers and Apple's TLS policy do).
/// - IP literals (`127.0.0.1`, `::1`, `[::1]`): `X509_check_ip_asc` against iPAddress
///   entries only, so a wildcard or a DNS entry can never match an address.
/// - An empty name is refused, never treated as "skip the check".
enum HostNameCheck {
    /// Success when `certificate` is valid for `host`.
    static func check(_ certificate: Certificate, host: String) -> Result<Void, TrustEvaluationError> {
        var name = Substring(host)
        if name.hasPrefix("["), name.hasSuffix("]"), name.count >= 2 {
            name = name.dropFirst().dropLast()
        }
        guard !name.isEmpty else {
            return .failure(TrustEvaluationError(
                reason: .invalidHostName, certificateSubject: certificate.subjectSummary,
                detail: "empty host name; an empty name is refused rather than left unchecked"))
        }
        if isIPAddress(String(name)) {
            let matched = String(name).withCString { X509_check_ip_asc(certificate.handle.pointer, $0, 0) }
            ERR_clear_error()
            return matched == 1 ? .success(()) : .failure(TrustEvaluationError(
                reason: .hostMismatch, certificateSubject: certificate.subjectSummary,
                detail: "the certificate has no iPAddress subjectAltName \(name)"))
        }
        // A fully qualified name may end in one dot; the certificate never carries it.
        if name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty, !name.contains("\0") else {
            return .failure(TrustEvaluationError(
                reason: .invalidHostName, certificateSubject: certificate.subjectSummary,
                detail: "'\(host)' is not a usable host name"))
        }
        let utf8 = Array(name.utf8)
        let flags = UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT)
        // The length is passed explicitly, so no C-string truncation can shorten the name.
        let matched = utf8.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                X509_check_host(certificate.handle.pointer, $0.baseAddress, $0.count, flags, nil)
            }
        }
        ERR_clear_error()
        return matched == 1 ? .success(()) : .failure(TrustEvaluationError(
            reason: .hostMismatch, certificateSubject: certificate.subjectSummary,
            detail: "the certificate's DNS subjectAltNames do not match '\(name)'"))
    }

    /// True for a textual IPv4 (dotted quad) or IPv6 address.
    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return text.withCString { inet_pton(AF_INET, $0, &v4) == 1 || inet_pton(AF_INET6, $0, &v6) == 1 }
    }
}

extension Certificate {
    /// Whether this certificate names `host` (a DNS name or an IP literal), by the same rules
    /// as the policy's own check (`HostNameCheck`): for a trust decision made outside a
    /// `SecurityPolicy`, such as a challenge handler's, that must still bind a host.
    package func names(host: String) -> Bool {
        if case .success = HostNameCheck.check(self, host: host) { return true }
        return false
    }
}
