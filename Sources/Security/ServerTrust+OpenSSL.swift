import COpenSSL
import Foundation

/// Engine hooks: build a `ServerTrust` straight from OpenSSL objects during a TLS
/// handshake. `package`: only Curlew's engine (SessionCore's OpenSSL verify callback) uses
/// them; an application builds a `ServerTrust` from `Certificate`s instead.
///
/// The certificates are not re-parsed: each `X509` gets one more reference, held by the
/// returned value, so the trust stays valid after the handshake objects are gone.
extension ServerTrust {
    /// For engine use. A trust from a `STACK_OF(X509)*` whose first element is the leaf,
    /// such as `SSL_get_peer_cert_chain` on a client or `SSL_get0_verified_chain`.
    /// The stack is borrowed: it is neither freed nor changed.
    /// Throws `TrustEvaluationError` (`.emptyChain`, `.malformedCertificate`).
    package init(x509Chain stack: OpaquePointer, verificationDate: Date = .now) throws {
        var certificates: [Certificate] = []
        let count = curlew_ossl_sk_X509_num(stack)
        for index in 0..<max(0, count) {
            guard let x509 = curlew_ossl_sk_X509_value(stack, index) else { continue }
            certificates.append(try Self.certificate(retaining: x509))
        }
        guard !certificates.isEmpty else {
            throw TrustEvaluationError(reason: .emptyChain, detail: "the certificate stack is empty")
        }
        self.init(certificates: certificates, verificationDate: verificationDate)
    }

    /// For engine use. A trust from the `X509_STORE_CTX*` that OpenSSL hands to an
    /// `SSL_CTX_set_cert_verify_callback` callback: the leaf is
    /// `X509_STORE_CTX_get0_cert`, the rest is `X509_STORE_CTX_get0_untrusted` (the chain
    /// the peer sent) without the leaf. The context is borrowed and not changed.
    package init(storeContext context: OpaquePointer, verificationDate: Date = .now) throws {
        guard let leaf = X509_STORE_CTX_get0_cert(context) else {
            throw TrustEvaluationError(reason: .emptyChain, detail: "the handshake offered no server certificate")
        }
        var certificates = [try Self.certificate(retaining: leaf)]
        if let untrusted = X509_STORE_CTX_get0_untrusted(context) {
            let count = curlew_ossl_sk_X509_num(untrusted)
            for index in 0..<max(0, count) {
                guard let x509 = curlew_ossl_sk_X509_value(untrusted, index), x509 != leaf else { continue }
                certificates.append(try Self.certificate(retaining: x509))
            }
        }
        self.init(certificates: certificates, verificationDate: verificationDate)
    }

    private static func certificate(retaining x509: OpaquePointer) throws -> Certificate {
        guard let handle = X509Handle(retaining: x509) else {
            throw TrustEvaluationError(reason: .malformedCertificate, detail: "could not take a reference to a peer certificate")
        }
        do {
            return try Certificate(handle: handle)
        } catch {
            throw TrustEvaluationError(
                reason: .malformedCertificate, certificateSubject: handle.subjectSummary(),
                detail: "peer certificate unreadable: \(error)")
        }
    }
}
