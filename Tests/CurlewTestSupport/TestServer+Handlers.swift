import Foundation
import NIOCore
import NIOSSL
import NIOTLS

// The small channel handlers of a TestServer connection. The pipeline is:
//
//   socket-level fault:  SocketFrontHandler -> RecordingHandler
//   normal (plain):      SocketFrontHandler -> RecordingHandler -> HTTPRequestDecoder -> TestServerHTTPHandler
//   normal (TLS):        SocketFrontHandler -> NIOSSLServerHandler -> TLSObserverHandler -> RecordingHandler
//                        -> HTTPRequestDecoder -> TestServerHTTPHandler
//
// All handlers run on the connection's event loop; none is Sendable and none needs to be.

extension TestServerFault {
    /// `true` for the faults that act on the raw socket when set server-wide.
    var isSocketLevel: Bool {
        switch self {
        case .acceptAndNeverRespond, .closeImmediately, .resetImmediately, .respondWithRawBytes: return true
        case .truncatedBody, .slowBody: return false
        }
    }

    /// The equivalent plain response for the response-shaped faults; `nil` for the others.
    var asResponse: TestResponse? {
        switch self {
        case .truncatedBody(let declaredLength, let sentLength):
            return TestResponse(
                status: 200,
                headers: [("Content-Length", String(declaredLength))],
                body: .data(Data(repeating: UInt8(ascii: "a"), count: max(0, sentLength))),
                framing: .contentLength,
                ending: .close
            )
        case .slowBody(let chunk, let interval, let count):
            let chunks = Array(repeating: TestResponse.Chunk(chunk, delay: interval), count: max(0, count))
            return TestResponse(status: 200, body: .stream(chunks), framing: .contentLength)
        case .acceptAndNeverRespond, .closeImmediately, .resetImmediately, .respondWithRawBytes:
            return nil
        }
    }
}

/// First handler of every connection: performs server-wide socket-level faults and offers a close or reset
/// of the raw TCP socket that bypasses TLS.
final class SocketFrontHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let fault: TestServerFault?
    private var context: ChannelHandlerContext?
    private var pendingRequestHead = Data()
    private var rawBytesWritten = false

    init(fault: TestServerFault?) {
        self.fault = fault
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        switch fault {
        case .closeImmediately: closeRaw()
        case .resetImmediately: resetRaw()
        default: break
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .respondWithRawBytes(let bytes, let close) = fault, !rawBytesWritten {
            let buffer = unwrapInboundIn(data)
            pendingRequestHead.append(contentsOf: buffer.readableBytesView)
            let looksLikeHTTP = pendingRequestHead.first.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
            if looksLikeHTTP != true || pendingRequestHead.range(of: Data("\r\n\r\n".utf8)) != nil {
                rawBytesWritten = true
                pendingRequestHead = Data()
                let written = context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)))
                if close {
                    written.assumeIsolated().whenComplete { _ in self.closeRaw() }
                }
            }
        }
        context.fireChannelRead(data)
    }

    /// Closes the TCP socket directly (FIN), skipping any TLS `close_notify`.
    func closeRaw() {
        context?.close(promise: nil)
    }

    /// Resets the TCP connection: `SO_LINGER {1, 0}` then close, so the kernel sends RST.
    func resetRaw() {
        guard let context else { return }
        guard let provider = context.channel as? any SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            self.closeRaw()
        }
    }
}

/// Records every application byte read on a connection (after TLS decryption when TLS is on),
/// and any error passing through.
final class RecordingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let connectionID: Int
    private let state: TestServerState

    init(connectionID: Int, state: TestServerState) {
        self.connectionID = connectionID
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        state.recordBytes(connectionID, Data(buffer.readableBytesView))
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        state.recordError(connectionID, error)
        context.fireErrorCaught(error)
    }
}

/// Counts completed TLS handshakes and notes the ALPN result and whether a client certificate was shown.
final class TLSObserverHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let connectionID: Int
    private let state: TestServerState

    init(connectionID: Int, state: TestServerState) {
        self.connectionID = connectionID
        self.state = state
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted(let negotiatedProtocol) = tlsEvent {
            let sslHandler = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)
            state.recordHandshake(
                connectionID,
                alpn: negotiatedProtocol,
                clientCertificatePresented: sslHandler?.peerCertificate != nil
            )
        }
        context.fireUserInboundEventTriggered(event)
    }
}
