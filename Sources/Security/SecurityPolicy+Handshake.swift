import COpenSSL
import Foundation

/// Engine hook: evaluate inside OpenSSL's certificate verification callback. `package`:
/// it takes OpenSSL pointers, so only Curlew's engine (SessionCore) has a use for it.
extension SecurityPolicy {
    /// For engine use, from an `SSL_CTX_set_cert_verify_callback` callback (which
    /// replaces OpenSSL's own `X509_verify_cert` for that handshake).
    ///
    /// Builds the trust from `context` (see `ServerTrust.init(storeContext:)`), evaluates
    /// it for `domain` at `verificationDate` with the handshake's verify parameters and
    /// security level (`VerificationSettings(handshake:)`: the level OpenSSL's own
    /// verification would apply), and on refusal records an error in the
    /// context (`X509_STORE_CTX_set_error`: OpenSSL's own code for chain errors,
    /// `X509_V_ERR_HOSTNAME_MISMATCH` / `X509_V_ERR_IP_ADDRESS_MISMATCH` for host errors,
    /// `X509_V_ERR_APPLICATION_VERIFICATION` for pinning), so libcurl's error text says
    /// why. The callback returns 1 for `.success` and 0 for `.failure`; keep the
    /// `TrustEvaluationError` to report it as the transfer's error.
    package func evaluateHandshake(
        storeContext context: OpaquePointer, forDomain domain: String?, verificationDate: Date = .now
    ) -> Result<Void, TrustEvaluationError> {
        evaluateHandshakeChain(storeContext: context, forDomain: domain, verificationDate: verificationDate).map { _ in () }
    }

    /// `evaluateHandshake(storeContext:forDomain:verificationDate:)`, returning on acceptance
    /// the chain per-host pins are judged against (see `evaluateChain(_:forDomain:settings:)`).
    /// A caller that refuses the chain afterwards (a per-host pin) sets the context's error again.
    package func evaluateHandshakeChain(
        storeContext context: OpaquePointer, forDomain domain: String?, verificationDate: Date = .now
    ) -> Result<[Certificate], TrustEvaluationError> {
        let result: Result<[Certificate], TrustEvaluationError>
        do {
            let trust = try ServerTrust(storeContext: context, verificationDate: verificationDate)
            result = evaluateChain(trust, forDomain: domain, settings: VerificationSettings(handshake: context))
        } catch let error as TrustEvaluationError {
            result = .failure(error)
        } catch {
            result = .failure(TrustEvaluationError(reason: .malformedCertificate, detail: "\(error)"))
        }
        switch result {
        case .success:
            X509_STORE_CTX_set_error(context, X509_V_OK)
        case .failure(let error):
            X509_STORE_CTX_set_error(context, Self.verifyResult(for: error, domain: domain))
        }
        return result
    }

    /// The `X509_V_ERR_*` code that best names a refusal, for the TLS stack's messages.
    static func verifyResult(for error: TrustEvaluationError, domain: String?) -> Int32 {
        if let code = error.openSSLVerifyResult, error.reason != .noPinMatched { return code }
        switch error.reason {
        case .hostMismatch, .invalidHostName:
            if let domain, HostNameCheck.isIPAddress(domain.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))) {
                return X509_V_ERR_IP_ADDRESS_MISMATCH
            }
            return X509_V_ERR_HOSTNAME_MISMATCH
        case .emptyChain:
            return X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        default:
            return X509_V_ERR_APPLICATION_VERIFICATION
        }
    }
}
