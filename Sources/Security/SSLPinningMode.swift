/// How a `SecurityPolicy` pins the server: AFNetworking's `AFSSLPinningMode`.
public enum SSLPinningMode: String, Sendable, Hashable, Codable, CaseIterable {
    /// No pinning: the chain must be trusted by the policy's roots (unless
    /// `allowInvalidCertificates`) and the host name must match (unless
    /// `validatesDomainName` is off).
    case none
    /// Public-key pinning: after the chain checks, one key of the chain (leaf,
    /// intermediate or root) must equal the key of a pinned certificate. Survives
    /// certificate renewal with the same key.
    case publicKey
    /// Certificate pinning: the pinned certificates are the only trust anchors, and one
    /// of them must be in the chain that anchors the server's certificate.
    case certificate
}
