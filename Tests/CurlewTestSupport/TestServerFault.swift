import Foundation

/// A misbehaviour the ``TestServer`` can inject, for the fault scenarios F1–F25.
///
/// A fault can be used in two places, and *where* it acts differs:
///
/// - **Server-wide**, via `TestServer(fault:)` or ``TestServer/fault``, read when a connection is accepted.
///   The socket-level cases (``acceptAndNeverRespond``, ``closeImmediately``, ``resetImmediately``,
///   ``respondWithRawBytes(_:close:)``) act on the raw TCP socket **before any TLS**: on a TLS server the
///   client sees no ServerHello (handshake timeout, EOF or reset during the handshake, or plaintext garbage).
///   The response-shaped cases (``truncatedBody(declaredLength:sentLength:)``,
///   ``slowBody(chunk:interval:count:)``) answer every request on the normal HTTP (and TLS) pipeline.
/// - **Per route**, via ``TestResponse/fault(_:)`` returned from a handler. Every case then acts **after the
///   request was fully read** (and after the TLS handshake), in place of a normal response.
public enum TestServerFault: Sendable {
    /// Accept the connection and read (recording the bytes) but never write anything.
    ///
    /// Server-wide on a TLS server the handshake never progresses. Drives idle/read/connect-phase timeouts
    /// (F9, F10). The connection stays open until the client closes it or the server shuts down.
    case acceptAndNeverRespond

    /// Close the connection (FIN) immediately: at accept when server-wide, after the request when per route
    /// (the client sees an empty reply).
    case closeImmediately

    /// Reset the connection (RST, via `SO_LINGER` `{1, 0}` then close): at accept when server-wide, after the
    /// request when per route (F22).
    case resetImmediately

    /// Write `bytes` verbatim (e.g. a malformed status line, an invalid HTTP version or huge headers) and then
    /// close the connection if `close` is `true`.
    ///
    /// Server-wide, the bytes are written on the raw socket once the request head has arrived (a read
    /// containing `"\r\n\r\n"`), or after the first read if it does not look like HTTP (e.g. a TLS
    /// ClientHello). Per route, they are written after the request (inside TLS if any). F13, F23.
    case respondWithRawBytes(Data, close: Bool = true)

    /// Respond `200` with `Content-Length: declaredLength` but send only `sentLength` bytes (`"a"` repeated)
    /// and then close the connection (F1). `sentLength` should be smaller than `declaredLength`.
    case truncatedBody(declaredLength: Int, sentLength: Int)

    /// Respond `200` with `Content-Length: chunk.count * count` right away, then trickle the body: wait
    /// `interval`, send `chunk`, repeated `count` times (F9 body stall, F11 slow loris, F10 deadline).
    case slowBody(chunk: Data, interval: Duration, count: Int)
}
