import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// An in-process HTTP/1.1 (optionally HTTPS) server on `127.0.0.1` for Curlew's tests.
///
/// Each server binds a fresh random port and owns one event-loop thread. It answers requests with route
/// handlers, can inject connection faults, and records what it received so tests can assert on it.
/// Call ``shutdown()`` in `tearDown` (it is synchronous and idempotent).
///
/// Plain route:
/// ```swift
/// let server = try TestServer()
/// defer { server.shutdown() }
/// server.route("/hello") { request in .text("hi \(request.queryItems.first?.value ?? "")") }
/// // GET \(server.baseURL)/hello?name=x  ->  200 "hi x"
/// ```
///
/// Fault for every connection (see ``TestServerFault`` for where each acts):
/// ```swift
/// let server = try TestServer(fault: .resetImmediately)
/// ```
///
/// Fault on one path, after the request was read:
/// ```swift
/// server.route("/stall") { _ in .fault(.acceptAndNeverRespond) }
/// ```
///
/// Handlers run on the server's event-loop thread: keep them quick and never block in them (use
/// ``TestResponse/delayBeforeHead`` or streamed chunks with delays instead of sleeping).
public final class TestServer: Sendable {
    /// The TCP port the server listens on (on `127.0.0.1`).
    public let port: Int
    /// `"https"` when the server was started with TLS, else `"http"`.
    public let scheme: String

    private let group: MultiThreadedEventLoopGroup
    private let serverChannel: any Channel
    private let state: TestServerState

    /// The default handler: `404 Not Found` with a short text body.
    public static let notFound: @Sendable (TestRequest) -> TestResponse = { request in
        .text("no route for \(request.method) \(request.path)\n", status: 404)
    }

    /// Starts a server on `127.0.0.1` at a random free port. Returns once it is listening.
    ///
    /// - Parameters:
    ///   - tls: Serve HTTPS with these settings; `nil` for plain HTTP.
    ///   - fault: A fault applied to every new connection (changeable later through ``fault``).
    ///   - keepAlive: Whether connections are kept open between requests (changeable through ``keepAlive``).
    ///   - handler: The handler for requests no route matches; default ``notFound``.
    ///   - port: The loopback port to listen on; 0 (the default) for any free one. A test that
    ///     replaces a server with another on the same address passes the first one's port.
    /// - Throws: Errors loading the TLS files or binding the socket.
    public init(
        tls: TestServerTLS? = nil,
        fault: TestServerFault? = nil,
        keepAlive: Bool = true,
        port requestedPort: Int = 0,
        handler: @escaping @Sendable (TestRequest) -> TestResponse = TestServer.notFound
    ) throws {
        let state = TestServerState(fault: fault, keepAlive: keepAlive, defaultHandler: handler)
        let sslContext = try tls.map { try $0.makeContext() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel: any Channel
        do {
            channel = try ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    Self.initializeConnection(channel, state: state, sslContext: sslContext)
                }
                .bind(host: "127.0.0.1", port: requestedPort)
                .wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw error
        }
        guard let port = channel.localAddress?.port else {
            _ = try? channel.close().wait()
            try? group.syncShutdownGracefully()
            throw TestServerError.noLocalAddress
        }
        self.port = port
        self.scheme = tls == nil ? "http" : "https"
        self.group = group
        self.serverChannel = channel
        self.state = state
    }

    deinit {
        // A test that forgot shutdown(): stop the thread without blocking (deinit may run anywhere).
        if state.beginShutdown() != nil {
            group.shutdownGracefully { _ in }
        }
    }

    private static func initializeConnection(
        _ channel: any Channel,
        state: TestServerState,
        sslContext: NIOSSLContext?
    ) -> EventLoopFuture<Void> {
        guard let registration = state.registerConnection(channel) else {
            return channel.close()
        }
        let id = registration.id
        channel.closeFuture.whenComplete { _ in state.connectionClosed(id) }
        return channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            let socketFault = registration.fault.flatMap { $0.isSocketLevel ? $0 : nil }
            let front = SocketFrontHandler(fault: socketFault)
            try pipeline.addHandler(front)
            if socketFault != nil {
                try pipeline.addHandler(RecordingHandler(connectionID: id, state: state))
                return
            }
            if let sslContext {
                try pipeline.addHandler(NIOSSLServerHandler(context: sslContext))
                try pipeline.addHandler(TLSObserverHandler(connectionID: id, state: state))
            }
            try pipeline.addHandler(RecordingHandler(connectionID: id, state: state))
            try pipeline.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
            try pipeline.addHandler(
                TestServerHTTPHandler(
                    connectionID: id,
                    state: state,
                    serverFault: registration.fault,
                    serverKeepAlive: registration.keepAlive,
                    front: front
                )
            )
        }
    }

    // MARK: - Addresses

    /// `"http://127.0.0.1:PORT"` or `"https://127.0.0.1:PORT"` (no trailing slash).
    public var baseURLString: String {
        "\(scheme)://127.0.0.1:\(port)"
    }

    /// ``baseURLString`` as a `URL`.
    public var baseURL: URL {
        guard let url = URL(string: baseURLString) else {
            preconditionFailure("a scheme, an IPv4 literal and a port always form a valid URL")
        }
        return url
    }

    /// The URL for `pathAndQuery` on this server, e.g. `try server.url("/get?a=1")`.
    ///
    /// - Parameter pathAndQuery: A path starting with `/`, optionally followed by `?query`.
    /// - Returns: The absolute URL.
    /// - Throws: ``TestServerError/invalidPath(_:)`` if the result is not a valid URL.
    public func url(_ pathAndQuery: String) throws -> URL {
        guard pathAndQuery.hasPrefix("/"), let url = URL(string: baseURLString + pathAndQuery) else {
            throw TestServerError.invalidPath(pathAndQuery)
        }
        return url
    }

    // MARK: - Routes and behaviour

    /// Registers `handler` for requests whose path (the URI before `?`) equals `path` exactly.
    ///
    /// Later registrations for the same path win; routes may be added while the server runs.
    ///
    /// - Parameters:
    ///   - path: The exact path, e.g. `"/upload"`.
    ///   - method: Only match this method (e.g. `"POST"`); `nil` matches any.
    ///   - respondBeforeBody: Call the handler as soon as the request head arrives (the request's body is
    ///     empty and the real body is read and discarded) and never send `100 Continue`: for F24 (a `413`
    ///     before the upload finished). Otherwise the body is collected first and `Expect: 100-continue`
    ///     is answered with `100 Continue`.
    ///   - handler: Builds the response; runs on the event loop.
    public func route(
        _ path: String,
        method: String? = nil,
        respondBeforeBody: Bool = false,
        _ handler: @escaping @Sendable (TestRequest) -> TestResponse
    ) {
        let route = TestRoute(method: method, path: path, respondBeforeBody: respondBeforeBody, handler: handler)
        state.value.withLock { $0.routes.append(route) }
    }

    /// Registers a fixed `response` for `path` (see ``route(_:method:respondBeforeBody:_:)``).
    ///
    /// - Parameters:
    ///   - path: The exact path.
    ///   - method: Only match this method; `nil` matches any.
    ///   - response: The response sent every time.
    public func route(_ path: String, method: String? = nil, response: TestResponse) {
        route(path, method: method) { _ in response }
    }

    /// Replaces the handler for requests no route matches.
    ///
    /// - Parameter handler: The new fallback handler.
    public func setDefaultHandler(_ handler: @escaping @Sendable (TestRequest) -> TestResponse) {
        state.value.withLock { $0.defaultHandler = handler }
    }

    /// The server-wide fault; read when each connection is accepted (existing connections keep theirs).
    public var fault: TestServerFault? {
        get { state.value.withLock { $0.fault } }
        set { state.value.withLock { $0.fault = newValue; $0.faultedConnectionsLeft = nil } }
    }

    /// Applies `fault` server-wide to the next `count` accepted connections only; the ones
    /// after them are served normally (a client's reconnection, with no timing to guess).
    public func setFault(_ fault: TestServerFault, forNextConnections count: Int) {
        state.value.withLock {
            $0.fault = count > 0 ? fault : nil
            $0.faultedConnectionsLeft = count > 0 ? count : nil
        }
    }

    /// Whether new connections are kept open between requests (default `true`). When `false`, every
    /// response carries `Connection: close` and the server closes after it. Read at accept time.
    public var keepAlive: Bool {
        get { state.value.withLock { $0.keepAlive } }
        set { state.value.withLock { $0.keepAlive = newValue } }
    }

    // MARK: - Recording

    /// Every complete request received so far, in arrival order.
    public var requests: [TestRequest] {
        state.value.withLock { $0.requests }
    }

    /// A record of every accepted connection, in accept order (index `id - 1`).
    public var connections: [TestConnectionRecord] {
        state.value.withLock { $0.connections }
    }

    /// How many TCP connections the server has accepted.
    public var acceptedConnectionCount: Int {
        state.value.withLock { $0.connections.count }
    }

    /// How many connections are currently open.
    public var openConnectionCount: Int {
        state.value.withLock { $0.openChannels.count }
    }

    /// How many TLS handshakes the server completed.
    public var handshakeCount: Int {
        state.value.withLock { $0.handshakeCount }
    }

    /// The total number of application bytes read over all connections (decrypted bytes under TLS).
    ///
    /// `0` after a client rejected the server's certificate proves no request bytes were sent.
    public var recordedApplicationBytes: Int {
        state.value.withLock { $0.connections.reduce(0) { $0 + $1.receivedBytes.count } }
    }

    // MARK: - Waiting

    /// Blocks until `condition` holds or `timeout` passes, polling every 5 ms. The default
    /// limits are generous (CI is a loaded 2-core machine): a working run returns as soon as
    /// the condition holds, and only a broken one waits the whole limit.
    ///
    /// - Parameters:
    ///   - timeout: The longest wait.
    ///   - condition: Checked against this server.
    /// - Returns: Whether the condition held before the timeout.
    public func wait(timeout: Duration = .seconds(30), until condition: (TestServer) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition(self) {
            if ContinuousClock.now >= deadline {
                return false
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return true
    }

    /// Blocks until at least `count` connections were accepted, or `timeout` passes.
    ///
    /// - Parameters:
    ///   - count: The number of accepted connections to wait for.
    ///   - timeout: The longest wait.
    /// - Returns: Whether the count was reached.
    @discardableResult
    public func waitForConnections(count: Int, timeout: Duration = .seconds(30)) -> Bool {
        wait(timeout: timeout) { $0.acceptedConnectionCount >= count }
    }

    /// Blocks until at least `count` complete requests were received, or `timeout` passes.
    ///
    /// - Parameters:
    ///   - count: The number of requests to wait for.
    ///   - timeout: The longest wait.
    /// - Returns: Whether the count was reached.
    @discardableResult
    public func waitForRequests(count: Int, timeout: Duration = .seconds(30)) -> Bool {
        wait(timeout: timeout) { $0.requests.count >= count }
    }

    /// Blocks until no connection is open, or `timeout` passes (e.g. to check a client closed its sockets).
    ///
    /// - Parameter timeout: The longest wait.
    /// - Returns: Whether all connections were closed.
    @discardableResult
    public func waitForAllConnectionsClosed(timeout: Duration = .seconds(30)) -> Bool {
        wait(timeout: timeout) { $0.openConnectionCount == 0 }
    }

    // MARK: - Shutdown

    /// Stops listening, closes every open connection and stops the event-loop thread.
    ///
    /// Synchronous and idempotent; call it from `tearDown` or a `defer`. Must not be called from a route
    /// handler (it would wait on its own thread).
    public func shutdown() {
        guard let channels = state.beginShutdown() else { return }
        let loop = serverChannel.eventLoop
        let closes = [serverChannel.close()] + channels.map { $0.close() }
        // Errors only mean "already closed".
        _ = try? EventLoopFuture.andAllComplete(closes, on: loop).wait()
        try? group.syncShutdownGracefully()
    }
}
