import Foundation

/// Why a `SecurityPolicy` refused a server: a reason code for programs, and a description
/// for people that names the certificate and gives OpenSSL's own words where it has them.
public struct TrustEvaluationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of refusal.
    public enum Reason: String, Sendable, Hashable, Codable, CaseIterable {
        /// The server presented no certificate.
        case emptyChain
        /// A certificate of the chain had expired at the verification date.
        case expired
        /// A certificate of the chain was not yet valid at the verification date.
        case notYetValid
        /// The chain ends in a self-signed certificate that is not a trusted root.
        case selfSigned
        /// No trusted root (or pinned anchor) issued the chain.
        case unknownIssuer
        /// The chain is invalid for another reason (bad signature, wrong purpose,
        /// a CA constraint, ...); `openSSLVerifyResult` says which.
        case invalidChain
        /// The certificate is not valid for the requested host name or IP address.
        case hostMismatch
        /// The host name to check was empty or not a usable name; an empty name never
        /// switches the check off.
        case invalidHostName
        /// A pinning mode is set but `pinnedCertificates` is empty (a configuration error).
        case noPinnedCertificates
        /// The chain is valid, but none of its certificates or keys matched a pin.
        case noPinMatched
        /// `allowInvalidCertificates` with domain validation and no pinning: AFNetworking
        /// refuses this, since only a pin can make a self-signed certificate trustworthy.
        case domainValidationRequiresPinning
        /// A certificate handed over by the TLS stack could not be read.
        case malformedCertificate
    }

    /// The kind of refusal.
    public let reason: Reason
    /// Subject summary (common name) of the certificate concerned, when there is one.
    public let certificateSubject: String?
    /// What went wrong, in words.
    public let detail: String
    /// OpenSSL's `X509_V_ERR_*` code when the refusal came from `X509_verify_cert`.
    public let openSSLVerifyResult: Int32?

    /// Creates an error.
    public init(reason: Reason, certificateSubject: String? = nil, detail: String, openSSLVerifyResult: Int32? = nil) {
        self.reason = reason
        self.certificateSubject = certificateSubject
        self.detail = detail
        self.openSSLVerifyResult = openSSLVerifyResult
    }

    /// One line: the reason, the certificate, the detail.
    public var description: String {
        var text = "server trust refused (\(reason.rawValue))"
        if let certificateSubject, !certificateSubject.isEmpty {
            text += " for certificate '\(certificateSubject)'"
        }
        text += ": \(detail)"
        if let code = openSSLVerifyResult {
            text += " [X509_V_ERR \(code)]"
        }
        return text
    }
}
