import Foundation
import NIOCore
import NIOSSL

/// TLS settings for a ``TestServer``: the same routes and faults, served over HTTPS.
///
/// Certificates are read from PEM files (see `TestCertificates` in this target for generating them).
///
/// ```swift
/// let certs = try TestCertificates.shared()
/// let tls = TestServerTLS(certificateChain: certs.leaf.chainPEM, privateKey: certs.leaf.privateKeyPEM)
/// let server = try TestServer(tls: tls)   // server.baseURL is "https://127.0.0.1:PORT"
/// ```
public struct TestServerTLS: Sendable {
    /// Whether the server asks for and checks a client certificate (mutual TLS).
    public enum ClientCertificateVerification: Sendable {
        /// Do not request a client certificate.
        case none
        /// Request one; accept the connection without one, but a presented certificate must verify.
        case optional
        /// Require a client certificate that verifies against ``TestServerTLS/trustRootsPath``
        /// (no hostname check).
        case required
    }

    /// A TLS protocol version, for narrowing what the server accepts (F7 protocol mismatch).
    public enum Version: Sendable {
        /// TLS 1.2.
        case tls1_2
        /// TLS 1.3.
        case tls1_3
    }

    /// PEM file with the server certificate first, then any intermediates.
    public var certificateChainPath: String
    /// PEM file with the server private key.
    public var privateKeyPath: String
    /// PEM file of CA certificates used to verify client certificates; `nil` uses the system store.
    public var trustRootsPath: String?
    /// Client-certificate policy; default ``ClientCertificateVerification/none``.
    public var clientCertificateVerification: ClientCertificateVerification
    /// ALPN protocols offered; default `["http/1.1"]`. HTTP/2 is not served.
    public var applicationProtocols: [String]
    /// Lowest TLS version accepted; `nil` for the library default.
    public var minimumVersion: Version?
    /// Highest TLS version accepted; `nil` for the library default (TLS 1.3).
    public var maximumVersion: Version?

    /// Creates TLS settings.
    ///
    /// - Parameters:
    ///   - certificateChainPath: PEM file with the server certificate chain.
    ///   - privateKeyPath: PEM file with the server private key.
    ///   - trustRootsPath: PEM file with CAs for verifying client certificates.
    ///   - clientCertificateVerification: Client-certificate policy.
    ///   - applicationProtocols: ALPN protocols offered.
    ///   - minimumVersion: Lowest TLS version accepted.
    ///   - maximumVersion: Highest TLS version accepted.
    public init(
        certificateChainPath: String,
        privateKeyPath: String,
        trustRootsPath: String? = nil,
        clientCertificateVerification: ClientCertificateVerification = .none,
        applicationProtocols: [String] = ["http/1.1"],
        minimumVersion: Version? = nil,
        maximumVersion: Version? = nil
    ) {
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
        self.trustRootsPath = trustRootsPath
        self.clientCertificateVerification = clientCertificateVerification
        self.applicationProtocols = applicationProtocols
        self.minimumVersion = minimumVersion
        self.maximumVersion = maximumVersion
    }

    /// Creates TLS settings from file URLs (e.g. `TestCertificates.Files` members).
    ///
    /// - Parameters:
    ///   - certificateChain: PEM file with the server certificate chain (e.g. `files.chainPEM`).
    ///   - privateKey: PEM file with the server private key (e.g. `files.privateKeyPEM`).
    ///   - trustRoots: PEM file with CAs for verifying client certificates.
    ///   - clientCertificateVerification: Client-certificate policy.
    public init(
        certificateChain: URL,
        privateKey: URL,
        trustRoots: URL? = nil,
        clientCertificateVerification: ClientCertificateVerification = .none
    ) {
        self.init(
            certificateChainPath: certificateChain.path,
            privateKeyPath: privateKey.path,
            trustRootsPath: trustRoots?.path,
            clientCertificateVerification: clientCertificateVerification
        )
    }

    /// Loads the PEM files and builds the NIOSSL context.
    func makeContext() throws -> NIOSSLContext {
        let chain = try NIOSSLCertificate.fromPEMFile(certificateChainPath)
        let key = try NIOSSLPrivateKey(file: privateKeyPath, format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(key)
        )
        if let trustRootsPath {
            configuration.trustRoots = .file(trustRootsPath)
        }
        switch clientCertificateVerification {
        case .none: configuration.certificateVerification = .none
        case .optional: configuration.certificateVerification = .optionalVerification
        case .required: configuration.certificateVerification = .noHostnameVerification
        }
        configuration.applicationProtocols = applicationProtocols
        // Do not wait long for the client's close_notify when the server closes (keeps shutdown fast).
        configuration.shutdownTimeout = .milliseconds(200)
        if let minimumVersion {
            configuration.minimumTLSVersion = Self.nioVersion(minimumVersion)
        }
        if let maximumVersion {
            configuration.maximumTLSVersion = Self.nioVersion(maximumVersion)
        }
        return try NIOSSLContext(configuration: configuration)
    }

    private static func nioVersion(_ version: Version) -> TLSVersion {
        switch version {
        case .tls1_2: return .tlsv12
        case .tls1_3: return .tlsv13
        }
    }
}
