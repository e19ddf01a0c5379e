import Foundation

/// What the ``TestServer`` saw on one accepted connection. Read it through ``TestServer/connections``.
public struct TestConnectionRecord: Sendable {
    /// The connection id (1, 2, 3, ... in accept order); matches ``TestRequest/connectionID``.
    public let id: Int
    /// Every application byte read on this connection, in order.
    ///
    /// On a TLS server these are the *decrypted* bytes, so a connection whose handshake failed records
    /// none. With a server-wide socket-level fault (no TLS, no HTTP on that connection) they are the raw
    /// TCP bytes, e.g. a TLS ClientHello.
    public internal(set) var receivedBytes: Data
    /// Whether the server completed a TLS handshake on this connection.
    public internal(set) var tlsHandshakeCompleted: Bool
    /// The ALPN protocol agreed in the handshake, if any.
    public internal(set) var negotiatedALPN: String?
    /// Whether the client presented a certificate (meaningful after a completed handshake).
    public internal(set) var clientCertificatePresented: Bool
    /// The number of complete requests read on this connection.
    public internal(set) var requestCount: Int
    /// The first error the server pipeline reported (e.g. a TLS handshake failure or a request parse
    /// error), as text; `nil` if none.
    public internal(set) var error: String?
    /// Whether the connection has closed.
    public internal(set) var isClosed: Bool

    init(id: Int) {
        self.id = id
        self.receivedBytes = Data()
        self.tlsHandshakeCompleted = false
        self.negotiatedALPN = nil
        self.clientCertificatePresented = false
        self.requestCount = 0
        self.error = nil
        self.isClosed = false
    }
}
