import Foundation
import NIOCore
import NIOHTTP1

/// Reads requests (parsed by NIO's `HTTPRequestDecoder`), asks the route for a ``TestResponse`` and
/// serialises it by hand, one request at a time (pipelined requests wait in a queue).
///
/// Responses are written as raw bytes so that tests control framing exactly; nothing "fixes" the headers.
final class TestServerHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    private struct Pending {
        let request: TestRequest
        let route: TestRoute?
        let keepAliveRequested: Bool
    }

    private let connectionID: Int
    private let state: TestServerState
    /// A server-wide response-shaped fault that answers every request, if any.
    private let serverFaultResponse: TestResponse?
    private let serverKeepAlive: Bool
    private let front: SocketFrontHandler

    private var context: ChannelHandlerContext?
    private var head: HTTPRequestHead?
    private var body = Data()
    /// The current request is answered at its head (``TestRoute/respondBeforeBody``); its body is discarded.
    private var answeredAtHead = false
    private var queue: [Pending] = []
    private var responding = false
    /// Set once the connection is closing or a fault said "never respond": nothing more is written.
    private var stopped = false
    private var lastWrite: EventLoopFuture<Void>?

    init(
        connectionID: Int,
        state: TestServerState,
        serverFault: TestServerFault?,
        serverKeepAlive: Bool,
        front: SocketFrontHandler
    ) {
        self.connectionID = connectionID
        self.state = state
        self.serverFaultResponse = serverFault?.asResponse
        self.serverKeepAlive = serverKeepAlive
        self.front = front
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopped = true
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A request the decoder could not parse, or a TLS error: record it and drop the connection.
        state.recordError(connectionID, error)
        stopped = true
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
            body = Data()
            answeredAtHead = false
            let route = state.route(method: requestHead.method.rawValue, path: Self.path(of: requestHead.uri))
            if let route, route.respondBeforeBody {
                answeredAtHead = true
                enqueue(makeRequest(requestHead, body: Data()), route: route, head: requestHead)
            } else if requestHead.headers[canonicalForm: "expect"].contains(where: {
                $0.lowercased() == "100-continue"
            }) {
                write(Data("HTTP/1.1 100 Continue\r\n\r\n".utf8), flush: true)
            }
        case .body(let buffer):
            if !answeredAtHead {
                body.append(contentsOf: buffer.readableBytesView)
            }
        case .end:
            guard let requestHead = head else { return }
            head = nil
            if answeredAtHead {
                answeredAtHead = false
                return
            }
            let route = state.route(method: requestHead.method.rawValue, path: Self.path(of: requestHead.uri))
            enqueue(makeRequest(requestHead, body: body), route: route, head: requestHead)
            body = Data()
        }
    }

    // MARK: - Request queue

    private func makeRequest(_ head: HTTPRequestHead, body: Data) -> TestRequest {
        TestRequest(
            connectionID: connectionID,
            method: head.method.rawValue,
            uri: head.uri,
            version: "HTTP/\(head.version.major).\(head.version.minor)",
            headers: head.headers.map { (name: $0.name, value: $0.value) },
            body: body
        )
    }

    private func enqueue(_ request: TestRequest, route: TestRoute?, head: HTTPRequestHead) {
        state.recordRequest(request)
        queue.append(Pending(request: request, route: route, keepAliveRequested: head.isKeepAlive))
        processNext()
    }

    private func processNext() {
        guard !responding, !stopped, !queue.isEmpty else { return }
        let pending = queue.removeFirst()
        responding = true
        let response: TestResponse
        if let serverFaultResponse {
            response = serverFaultResponse
        } else {
            let handler = pending.route?.handler ?? state.defaultHandler()
            response = handler(pending.request)
        }
        after(response.delayBeforeHead) {
            self.respond(response, to: pending)
        }
    }

    // MARK: - Writing

    private func respond(_ response: TestResponse, to pending: Pending) {
        guard !stopped else { return }
        if let fault = response.fault {
            perform(fault, for: pending)
            return
        }
        let isHeadRequest = pending.request.method == "HEAD"
        let statusForbidsBody = (100..<200).contains(response.status) || response.status == 204
            || response.status == 304
        let chunks: [TestResponse.Chunk]
        let framing: TestResponse.Framing
        switch response.body {
        case .data(let data):
            chunks = data.isEmpty ? [] : [TestResponse.Chunk(data)]
            framing = response.framing == .automatic ? .contentLength : response.framing
        case .stream(let streamChunks):
            chunks = streamChunks
            framing = response.framing == .automatic ? .chunked : response.framing
        }

        var headers = response.headers
        func has(_ name: String) -> Bool {
            headers.contains { $0.name.caseInsensitiveCompare(name) == .orderedSame }
        }
        if !statusForbidsBody {
            switch framing {
            case .contentLength where !has("Content-Length"):
                headers.append(("Content-Length", String(chunks.reduce(0) { $0 + $1.data.count })))
            case .chunked where !has("Transfer-Encoding"):
                headers.append(("Transfer-Encoding", "chunked"))
            default:
                break
            }
        }
        let wantsClose = !(response.keepAlive ?? (serverKeepAlive && pending.keepAliveRequested))
        if wantsClose && !has("Connection") {
            headers.append(("Connection", "close"))
        }
        let ending: TestResponse.Ending
        if response.closeAfterHeaders {
            ending = response.ending == .complete ? .close : response.ending
        } else if response.ending == .complete && (wantsClose || framing == .closeDelimited) {
            ending = .close
        } else {
            ending = response.ending
        }

        var head = "HTTP/1.1 \(response.status) \(response.reason ?? Self.reasonPhrase(response.status))\r\n"
        for (name, value) in headers {
            head += "\(name): \(value)\r\n"
        }
        head += "\r\n"
        let sendBody = !isHeadRequest && !statusForbidsBody && !response.closeAfterHeaders
        // A body piece due at once goes out in the same write as the head, as a server's
        // writev would send it: the client reads both together, not as a race of two writes.
        let bodyFollowsAtOnce = sendBody && chunks.first.map { $0.delay <= .zero } == true
        write(Data(head.utf8), flush: !bodyFollowsAtOnce)
        // No body, no chunked terminator either (a HEAD's, a 204's or a 304's).
        writeChunks(sendBody ? chunks[...] : [], chunked: sendBody && framing == .chunked, ending: ending)
    }

    private func writeChunks(_ chunks: ArraySlice<TestResponse.Chunk>, chunked: Bool, ending: TestResponse.Ending) {
        // Pieces without a delay are written in a loop, not by recursion: a body of a thousand
        // such pieces recursed a thousand frames deep on the event loop's thread, which an
        // AddressSanitizer build (larger frames) can run out of stack for.
        var rest = chunks
        while let chunk = rest.first, chunk.delay <= .zero {
            guard !stopped else { return }
            writeChunk(chunk, chunked: chunked)
            rest = rest.dropFirst()
        }
        guard !stopped else { return }
        guard let chunk = rest.first else {
            if chunked && ending == .complete {
                write(Data("0\r\n\r\n".utf8), flush: true)
            }
            finish(ending)
            return
        }
        after(chunk.delay) {
            guard !self.stopped else { return }
            self.writeChunk(chunk, chunked: chunked)
            self.writeChunks(rest.dropFirst(), chunked: chunked, ending: ending)
        }
    }

    private func writeChunk(_ chunk: TestResponse.Chunk, chunked: Bool) {
        if chunked {
            if !chunk.data.isEmpty {  // an empty chunk would be the terminator
                var framed = Data((String(chunk.data.count, radix: 16) + "\r\n").utf8)
                framed.append(chunk.data)
                framed.append(contentsOf: Array("\r\n".utf8))
                write(framed, flush: true)
            } else {
                context?.flush()  // a head held for this piece goes now
            }
        } else {
            write(chunk.data, flush: true)
        }
    }

    private func finish(_ ending: TestResponse.Ending) {
        guard let context else { return }
        let written = lastWrite ?? context.eventLoop.makeSucceededVoidFuture()
        lastWrite = nil
        switch ending {
        case .complete:
            responding = false
            processNext()
        case .close:
            stopped = true
            written.assumeIsolated().whenComplete { _ in self.context?.close(promise: nil) }
        case .closeWithoutTLSShutdown:
            stopped = true
            written.assumeIsolated().whenComplete { _ in self.front.closeRaw() }
        case .reset:
            stopped = true
            written.assumeIsolated().whenComplete { _ in self.front.resetRaw() }
        }
    }

    private func perform(_ fault: TestServerFault, for pending: Pending) {
        switch fault {
        case .acceptAndNeverRespond:
            stopped = true
        case .closeImmediately:
            finish(.close)
        case .resetImmediately:
            finish(.reset)
        case .respondWithRawBytes(let bytes, let close):
            write(bytes, flush: true)
            finish(close ? .close : .complete)
        case .truncatedBody, .slowBody:
            if let response = fault.asResponse {
                respond(response, to: pending)
            }
        }
    }

    private func write(_ bytes: Data, flush: Bool) {
        guard let context else { return }
        let buffer = context.channel.allocator.buffer(bytes: bytes)
        let future = context.write(wrapOutboundOut(buffer))
        if flush {
            context.flush()
        }
        lastWrite = future
    }

    /// Runs `body` now if `delay` is not positive, else after `delay` on this connection's event loop.
    private func after(_ delay: Duration, _ body: @escaping () -> Void) {
        guard delay > .zero, let context else {
            body()
            return
        }
        context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(delay)) { body() }
    }

    private static func path(of uri: String) -> String {
        uri.firstIndex(of: "?").map { String(uri[..<$0]) } ?? uri
    }

    private static func reasonPhrase(_ status: Int) -> String {
        let phrase = HTTPResponseStatus(statusCode: status).reasonPhrase
        return phrase.isEmpty ? "Status" : phrase
    }
}
