import COpenSSL
import Foundation

/// The OpenSSL verification settings a chain evaluation runs with, beyond the policy itself:
/// the security level (OpenSSL's "auth level": minimum key sizes and signature digests for
/// every certificate of the chain) and, during a TLS handshake, the handshake's own
/// `X509_VERIFY_PARAM`.
///
/// Why it exists: the policy verifies chains in an `X509_STORE_CTX` of its own (its anchors
/// are not libcurl's). A fresh context starts from OpenSSL's library defaults, in which no
/// security level is set, so without these settings a chain that OpenSSL's own verification
/// refuses at the connection's level (an RSA-1024 key, a SHA-1 signature) would be accepted.
///
/// Not `Sendable`: `inheritedParameters` is borrowed from a live handshake and only valid
/// inside the verification callback that built the value.
package struct VerificationSettings {
    /// The OpenSSL security level (0 to 5) applied to the chain; 0 applies none.
    package var securityLevel: Int32
    /// A borrowed `X509_VERIFY_PARAM*` whose settings are inherited first (the handshake's).
    var inheritedParameters: OpaquePointer?

    /// Settings with `securityLevel` and nothing inherited.
    package init(securityLevel: Int32) {
        self.securityLevel = securityLevel
        self.inheritedParameters = nil
    }

    /// Outside a handshake (`SecurityPolicy.evaluate`): the security level a TLS client
    /// context of this machine gets by default, so a stand-alone evaluation answers as the
    /// handshake would.
    package static var standalone: VerificationSettings {
        VerificationSettings(securityLevel: defaultSecurityLevel)
    }

    /// The level of a fresh `SSL_CTX` for a TLS client: OpenSSL's compiled-in default (2 on
    /// Debian) or what the system's `openssl.cnf` sets. Read once per process.
    package static let defaultSecurityLevel: Int32 = {
        guard let method = TLS_client_method(), let context = SSL_CTX_new(method) else { return 2 }
        defer { SSL_CTX_free(context) }
        return SSL_CTX_get_security_level(context)
    }()

    /// The settings of the handshake that handed `storeContext` to a
    /// `SSL_CTX_set_cert_verify_callback` callback: the `SSL`'s own verify parameters and
    /// its security level, as OpenSSL's `ssl_verify_cert_chain` would apply them. Without an
    /// `SSL` attached, the context's own auth level (or the default level) is used.
    init(handshake storeContext: OpaquePointer) {
        if let raw = X509_STORE_CTX_get_ex_data(storeContext, SSL_get_ex_data_X509_STORE_CTX_idx()) {
            let ssl = OpaquePointer(raw)
            securityLevel = SSL_get_security_level(ssl)
            inheritedParameters = SSL_get0_param(ssl)
            return
        }
        let level = X509_STORE_CTX_get0_param(storeContext).map { X509_VERIFY_PARAM_get_auth_level($0) } ?? -1
        securityLevel = level >= 0 ? level : Self.defaultSecurityLevel
        inheritedParameters = nil
    }

    /// Applies the settings to a freshly initialised verification context, before the
    /// policy's own settings (purpose, time, partial chains) are added.
    func apply(to context: OpaquePointer) {
        // The TLS-server defaults first, as ssl_verify_cert_chain does ("ssl_server":
        // purpose and trust settings for a server's chain).
        _ = X509_STORE_CTX_set_default(context, "ssl_server")
        guard let parameters = X509_STORE_CTX_get0_param(context) else { return }
        if let inheritedParameters {
            _ = X509_VERIFY_PARAM_set1(parameters, inheritedParameters)
            // Host names, addresses and e-mail are the policy's to check
            // (`validatesDomainName`), never an inherited side effect.
            _ = X509_VERIFY_PARAM_set1_host(parameters, nil, 0)
            _ = X509_VERIFY_PARAM_set1_email(parameters, nil, 0)
            _ = X509_VERIFY_PARAM_set1_ip(parameters, nil, 0)
        }
        X509_VERIFY_PARAM_set_auth_level(parameters, securityLevel)
    }
}
