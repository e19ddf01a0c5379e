import Foundation

/// A client certificate and its private key, for servers that require mutual TLS.
///
/// Set it as `SessionConfiguration.clientCertificate`. Both forms take PEM; a key
/// protected by a passphrase needs `passphrase`. libcurl reads the files (or copies the
/// bytes) when it opens each connection, and a connection or TLS session is only reused
/// with the same client certificate.
public enum ClientCertificate: Sendable, Hashable {
    /// PEM files on disk: the certificate (optionally followed by its intermediates) and
    /// the private key.
    case pemFiles(certificate: URL, privateKey: URL, passphrase: String?)
    /// PEM bytes in memory (e.g. from a keychain or a secret store); nothing is written to disk.
    case pem(certificate: Data, privateKey: Data, passphrase: String?)
}
