import COpenSSL
import Foundation

/// Runs OpenSSL's path building and verification (`X509_verify_cert`) for one chain
/// against one `TrustStore`, at a given time, for the TLS-server purpose, with the
/// security level and verify parameters of `settings` (the handshake's, during one).
enum ChainVerifier {
    /// The verified path, leaf first and ending at the anchor that the store supplied
    /// (which the server may not have sent), or OpenSSL's refusal. A chain `store` refuses
    /// is verified again against its wider store, if it has one (`TrustStore.wider`), whose
    /// answer is then the answer; a chain the narrow store anchors is accepted at once (the
    /// wider store holds the same anchors, and more).
    static func verify(
        _ trust: ServerTrust, against store: TrustStore, settings: VerificationSettings
    ) -> Result<[Certificate], TrustEvaluationError> {
        let first = verifyOnce(trust, against: store, settings: settings)
        guard case .failure = first, let wider = store.wider?() else { return first }
        return verifyOnce(trust, against: wider, settings: settings)
    }

    private static func verifyOnce(
        _ trust: ServerTrust, against store: TrustStore, settings: VerificationSettings
    ) -> Result<[Certificate], TrustEvaluationError> {
        guard let leaf = trust.certificates.first else {
            return .failure(TrustEvaluationError(reason: .emptyChain, detail: "the server presented no certificate"))
        }
        guard let context = X509_STORE_CTX_new() else {
            return .failure(TrustEvaluationError(reason: .invalidChain, detail: "OpenSSL could not allocate a verification context"))
        }
        defer { X509_STORE_CTX_free(context) }
        guard let untrusted = curlew_ossl_sk_X509_new_null() else {
            return .failure(TrustEvaluationError(reason: .invalidChain, detail: "OpenSSL could not allocate a certificate stack"))
        }
        // The stack borrows the handles' references; `trust` keeps them alive until return.
        defer { curlew_ossl_sk_X509_free(untrusted) }
        for certificate in trust.certificates.dropFirst() {
            guard curlew_ossl_sk_X509_push(untrusted, certificate.handle.pointer) > 0 else {
                return .failure(TrustEvaluationError(reason: .invalidChain, detail: "OpenSSL could not grow a certificate stack"))
            }
        }

        ERR_clear_error()
        guard X509_STORE_CTX_init(context, store.pointer, leaf.handle.pointer, untrusted) == 1 else {
            return .failure(TrustEvaluationError(
                reason: .invalidChain, detail: "X509_STORE_CTX_init failed: \(OpenSSLText.drainErrorQueue())"))
        }
        // The handshake's parameters and security level first; the policy's own settings
        // below are applied on top of them.
        settings.apply(to: context)
        // TLS server purpose: the leaf's extended key usage must allow serverAuth.
        _ = X509_STORE_CTX_set_purpose(context, X509_PURPOSE_SSL_SERVER)
        if let parameters = X509_STORE_CTX_get0_param(context) {
            X509_VERIFY_PARAM_set_time(parameters, time_t(trust.verificationDate.timeIntervalSince1970.rounded(.down)))
            if store.anchorsMayBeIntermediates {
                X509_VERIFY_PARAM_set_flags(parameters, UInt(X509_V_FLAG_PARTIAL_CHAIN))
            }
        }

        let verified = withExtendedLifetime(trust) { X509_verify_cert(context) }
        guard verified == 1 else {
            let code = X509_STORE_CTX_get_error(context)
            var subject: String?
            if let current = X509_STORE_CTX_get_current_cert(context) {
                subject = certificateSubject(current)
            }
            _ = OpenSSLText.drainErrorQueue()
            return .failure(error(forVerifyResult: code, subject: subject ?? leaf.subjectSummary, store: store))
        }
        return .success(verifiedChain(of: context, reusing: trust.certificates))
    }

    /// The chain OpenSSL built, as `Certificate`s: the sent ones are reused by identity,
    /// anchors from the store get a reference of their own.
    private static func verifiedChain(of context: OpaquePointer, reusing sent: [Certificate]) -> [Certificate] {
        guard let chain = X509_STORE_CTX_get0_chain(context) else { return [] }
        var result: [Certificate] = []
        let count = curlew_ossl_sk_X509_num(chain)
        for index in 0..<max(0, count) {
            guard let x509 = curlew_ossl_sk_X509_value(chain, index) else { continue }
            if let known = sent.first(where: { $0.handle.pointer == x509 }) {
                result.append(known)
            } else if let handle = X509Handle(retaining: x509), let certificate = try? Certificate(handle: handle) {
                result.append(certificate)
            }
        }
        return result
    }

    private static func certificateSubject(_ x509: OpaquePointer) -> String? {
        guard let name = X509_get_subject_name(x509) else { return nil }
        if let commonName = OpenSSLText.commonName(of: name), !commonName.isEmpty { return commonName }
        return OpenSSLText.oneLine(name)
    }

    /// Maps an `X509_V_ERR_*` result to a reason, keeping OpenSSL's text as the detail.
    static func error(forVerifyResult code: Int32, subject: String?, store: TrustStore) -> TrustEvaluationError {
        let text = OpenSSLText.verifyErrorString(code)
        let reason = TrustEvaluationError.Reason(verifyResult: code)
        return TrustEvaluationError(
            reason: reason, certificateSubject: subject,
            detail: "\(text) (anchors: \(store.origin))", openSSLVerifyResult: code)
    }
}

extension TrustEvaluationError.Reason {
    /// The reason an `X509_V_ERR_*` result stands for (`invalidChain` for those without
    /// one of their own).
    package init(verifyResult code: Int32) {
        switch code {
        case X509_V_ERR_CERT_HAS_EXPIRED:
            self = .expired
        case X509_V_ERR_CERT_NOT_YET_VALID:
            self = .notYetValid
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
            self = .selfSigned
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
             X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            self = .unknownIssuer
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
            self = .hostMismatch
        default:
            self = .invalidChain
        }
    }
}
