import Foundation
import NIOCore
import Synchronization

/// A handler registered with ``TestServer/route(_:method:respondBeforeBody:_:)``.
struct TestRoute: Sendable {
    let method: String?
    let path: String
    let respondBeforeBody: Bool
    let handler: @Sendable (TestRequest) -> TestResponse
}

/// Everything a ``TestServer`` shares between the test thread and its event loop.
///
/// All mutable state lives in one `Mutex`, so this type is `Sendable` without `@unchecked`.
/// Locks are held only for short copies; no handler closure and no NIO call runs under the lock.
final class TestServerState: Sendable {
    struct Value {
        var routes: [TestRoute] = []
        var defaultHandler: @Sendable (TestRequest) -> TestResponse
        var fault: TestServerFault?
        /// How many more connections `fault` is for; nil: every one until changed.
        var faultedConnectionsLeft: Int?
        var keepAlive: Bool
        /// Index `id - 1`.
        var connections: [TestConnectionRecord] = []
        var requests: [TestRequest] = []
        var handshakeCount = 0
        var openChannels: [Int: any Channel] = [:]
        var isShutDown = false
    }

    let value: Mutex<Value>

    init(
        fault: TestServerFault?,
        keepAlive: Bool,
        defaultHandler: @escaping @Sendable (TestRequest) -> TestResponse
    ) {
        value = Mutex(Value(defaultHandler: defaultHandler, fault: fault, keepAlive: keepAlive))
    }

    /// Registers an accepted channel; `nil` if the server is shutting down (the caller closes it).
    func registerConnection(_ channel: any Channel) -> (id: Int, fault: TestServerFault?, keepAlive: Bool)? {
        value.withLock { state in
            guard !state.isShutDown else { return nil }
            let id = state.connections.count + 1
            state.connections.append(TestConnectionRecord(id: id))
            state.openChannels[id] = channel
            let fault = state.fault
            if let left = state.faultedConnectionsLeft {
                state.faultedConnectionsLeft = left - 1
                if left <= 1 { state.fault = nil; state.faultedConnectionsLeft = nil }
            }
            return (id, fault, state.keepAlive)
        }
    }

    func connectionClosed(_ id: Int) {
        value.withLock { state in
            state.openChannels[id] = nil
            state.connections[id - 1].isClosed = true
        }
    }

    func recordBytes(_ id: Int, _ bytes: Data) {
        value.withLock { $0.connections[id - 1].receivedBytes.append(bytes) }
    }

    func recordHandshake(_ id: Int, alpn: String?, clientCertificatePresented: Bool) {
        value.withLock { state in
            state.handshakeCount += 1
            state.connections[id - 1].tlsHandshakeCompleted = true
            state.connections[id - 1].negotiatedALPN = alpn
            state.connections[id - 1].clientCertificatePresented = clientCertificatePresented
        }
    }

    func recordError(_ id: Int, _ error: any Error) {
        let text = String(describing: error)
        value.withLock { state in
            if state.connections[id - 1].error == nil {
                state.connections[id - 1].error = text
            }
        }
    }

    func recordRequest(_ request: TestRequest) {
        value.withLock { state in
            state.requests.append(request)
            state.connections[request.connectionID - 1].requestCount += 1
        }
    }

    /// The most recently registered matching route (method-specific or any-method), if any.
    func route(method: String, path: String) -> TestRoute? {
        value.withLock { state in
            state.routes.last { route in
                route.path == path && (route.method == nil || route.method == method)
            }
        }
    }

    func defaultHandler() -> @Sendable (TestRequest) -> TestResponse {
        value.withLock { $0.defaultHandler }
    }

    /// Marks the state shut down and hands back the channels still open.
    func beginShutdown() -> [any Channel]? {
        value.withLock { state in
            guard !state.isShutDown else { return nil }
            state.isShutDown = true
            return Array(state.openChannels.values)
        }
    }
}
