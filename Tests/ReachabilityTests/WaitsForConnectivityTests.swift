import Foundation
import Glibc
@testable import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import Reachability

/// `SessionConfiguration.waitsForConnectivity` in network namespaces of the test's own: the
/// manager's driver runs in the client namespace, an HTTP responder listens on the host side
/// of the veth pair, and the client's route to it is removed and restored (the link taken down
/// and up) while a request waits.
final class WaitsForConnectivityTests: ReachabilityNamespaceTestCase {
    /// Records the monitor events of interest, in order.
    final class Events: EventMonitor, @unchecked Sendable {  // `lock` guards `names`
        private let lock = NSLock()
        private var names: [String] = []
        private var namesByTask: [Int: [String]] = [:]
        let queue = DispatchQueue(label: "WaitsForConnectivityTests.events")
        var recorded: [String] { lock.withLock { names } }
        /// The same, by task identifier.
        var recordedByTask: [Int: [String]] { lock.withLock { namesByTask } }
        /// Whether the task's completion event arrived (monitors hear of events in batches,
        /// up to a millisecond late: a test looks at `recorded` only once it is whole).
        var hasEnded: Bool { lock.withLock { names.contains { $0 == "completed" || $0 == "failed" } } }
        private func add(_ name: String, _ task: SessionTask) {
            lock.withLock {
                names.append(name)
                namesByTask[task.taskIdentifier, default: []].append(name)
            }
        }
        func task(_ task: SessionTask, willSend request: URLRequest) { add("willSend", task) }
        func taskIsWaitingForConnectivity(_ task: SessionTask) { add("waiting", task) }
        func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) { add(error == nil ? "completed" : "failed", task) }
    }

    /// Connects the namespaces and waits until the client's route to the host is usable (a
    /// veth link takes a moment to get its carrier after it is set up).
    func connectAndSettle() throws {
        try connectHost()
        let (_, recorder) = try startManager { NetworkReachabilityManager(address: Self.ipv4(Self.hostAddress)) }
        XCTAssertTrue(recorder.wait(for: .reachableViaEthernet), "the veth link never came up")
    }

    /// A listening TCP socket on the host side at `address` (one of the host namespace's), on
    /// a port of the kernel's choosing; closed when the test ends.
    func listen(at address: String) throws -> (descriptor: Int32, port: UInt16) {
        let listener: (Int32, UInt16) = try host.perform {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.ipv4(address)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard fd >= 0, bound == 0, Glibc.listen(fd, 8) == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
            return (fd, UInt16(bigEndian: address.sin_port))
        }
        addTeardownBlock { Glibc.close(listener.0) }
        return listener
    }

    /// A responder on the host side (at `address`, one of the host namespace's): answers
    /// every connection with `200 {}` and closes. (An HTTP proxy too: it answers any request.)
    func startResponder(at address: String = hostAddress) throws -> UInt16 {
        let (fd, port) = try listen(at: address)
        Thread {
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = recv(client, &buffer, buffer.count, 0)
                let answer = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".utf8)
                _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                Glibc.close(client)
            }
        }.start()
        return port
    }

    /// A manager whose driver thread (made at init) lives in the client namespace.
    func makeManager(
        waits: Bool, resourceTimeout: TimeInterval = 120, unixSocketPath: String? = nil,
        proxy: SessionConfiguration.Proxy = .none, events: Events
    ) throws -> URLSessionManager {
        let manager: URLSessionManager = try client.perform {
            var configuration = SessionConfiguration.default
            configuration.proxy = proxy
            configuration.waitsForConnectivity = waits
            configuration.timeoutIntervalForResource = resourceTimeout
            configuration.unixSocketPath = unixSocketPath
            return URLSessionManager(configuration: configuration, eventMonitors: [events])
        }
        addTeardownBlock { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        return manager
    }

    func waitUntil(_ condition: () -> Bool) -> Bool {
        for _ in 0..<3000 where !condition() { usleep(10_000) }  // bounded: 30 s
        return condition()
    }

    func testARequestWaitsForARouteAndGoesOutWhenItAppears() throws {
        try connectAndSettle()
        let port = try startResponder()
        try client.ip("link", "set", "crl0", "down")  // no route to 198.18.0.0/24 now
        let events = Events()
        let manager = try makeManager(waits: true, events: events)
        let done = Mutex<DataResponse?>(nil)
        let url = try XCTUnwrap(URL(string: "http://\(Self.hostAddress):\(port)/"))
        let task = manager.dataTask(with: URLRequest(url: url)) { response in done.withLock { $0 = response } }
        task.resume()
        XCTAssertTrue(waitUntil { events.recorded.contains("waiting") }, "no waiting event: \(events.recorded)")
        XCTAssertNil(done.withLock { $0 }, "the task must wait, not fail")
        try client.ip("link", "set", "crl0", "up")  // the connected route is back
        XCTAssertTrue(waitUntil { done.withLock { $0 } != nil }, "the task never completed")
        let response = try XCTUnwrap(done.withLock { $0 })
        XCTAssertNil(response.error, "\(String(describing: response.error))")
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertTrue(waitUntil { events.hasEnded }, "no completion event: \(events.recorded)")
        XCTAssertEqual(events.recorded, ["willSend", "waiting", "willSend", "completed"])
        XCTAssertTrue(waitUntil { ConnectivityWait.runningMonitorCount == 0 }, "the route monitor must stop after the wait")
    }

    func testWithoutWaitingTheRequestFailsAtOnce() throws {
        try connectAndSettle()
        let port = try startResponder()
        try client.ip("link", "set", "crl0", "down")
        let events = Events()
        let manager = try makeManager(waits: false, events: events)
        let done = Mutex<DataResponse?>(nil)
        let task = manager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):\(port)/")!)) { response in
            done.withLock { $0 = response }
        }
        task.resume()
        XCTAssertTrue(waitUntil { done.withLock { $0 } != nil })
        guard case .cannotConnect = done.withLock({ $0 })?.error as? SessionError else {
            return XCTFail("expected cannotConnect, got \(String(describing: done.withLock { $0 }?.error))")
        }
        XCTAssertTrue(waitUntil { events.hasEnded }, "no completion event: \(events.recorded)")
        XCTAssertFalse(events.recorded.contains("waiting"))
    }

    func testARouteThatIsThereMeansTheFailureStands() throws {
        // Connected, but nothing listens on that port: refused with a route in place.
        try connectAndSettle()
        let events = Events()
        let manager = try makeManager(waits: true, events: events)
        let done = Mutex<DataResponse?>(nil)
        let task = manager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):9/")!)) { response in
            done.withLock { $0 = response }
        }
        task.resume()
        XCTAssertTrue(waitUntil { done.withLock { $0 } != nil })
        guard case .cannotConnect = done.withLock({ $0 })?.error as? SessionError else {
            return XCTFail("expected cannotConnect, got \(String(describing: done.withLock { $0 }?.error))")
        }
        XCTAssertTrue(waitUntil { events.hasEnded }, "no completion event: \(events.recorded)")
        XCTAssertFalse(events.recorded.contains("waiting"))
    }

    /// Two features meeting: the wait finds a route, so the refusal stands, and the retrier
    /// is then asked about it — the task must not be left detached until its resource timeout.
    func testARefusalWithARouteGoesToTheRetrier() throws {
        try connectAndSettle()
        let events = Events()
        let manager = try makeManager(waits: true, events: events)
        let retrier = CountingRetrier()
        manager.requestRetrier = retrier
        let done = Mutex<DataResponse?>(nil)
        let task = manager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):9/")!)) { response in
            done.withLock { $0 = response }
        }
        task.resume()
        XCTAssertTrue(waitUntil { done.withLock { $0 } != nil }, "the task was left waiting")
        XCTAssertEqual(retrier.count, 1, "the retrier is asked once about the refusal")
        guard case .cannotConnect = done.withLock({ $0 })?.error as? SessionError else {
            return XCTFail("expected cannotConnect, got \(String(describing: done.withLock { $0 }?.error))")
        }
    }

    /// A POST whose connection is lost after it went out, while the route is gone: the server
    /// may have acted on it. The wait sent it again on its own once the route came back (the
    /// server acted twice), and the retrier, whose `RetryPolicy` refuses a POST, was never
    /// asked. It fails now (to the retrier), and a GET in the same case still waits.
    func testAPostLostAfterItWentOutIsNotSentAgainByTheWait() throws {
        try connectAndSettle()
        let requests = Mutex<[String]>([])
        let received = DispatchSemaphore(value: 0)
        let answer = DispatchSemaphore(value: 0)
        let (fd, port) = try listen(at: Self.hostAddress)
        Thread {
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = recv(client, &buffer, buffer.count, 0)
                requests.withLock { $0.append(String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).components(separatedBy: " ").first ?? "") }
                received.signal()
                _ = answer.wait(timeout: .now() + 30)
                // The head and 10 of the 100 bytes it announces, then the end: a lost connection.
                let partial = Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789".utf8)
                _ = partial.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                Glibc.close(client)
            }
        }.start()
        let url = try XCTUnwrap(URL(string: "http://\(Self.hostAddress):\(port)/"))
        for method in ["POST", "GET"] {
            let events = Events()
            let manager = try makeManager(waits: true, events: events)
            let done = Mutex<DataResponse?>(nil)
            var request = URLRequest(url: url)
            request.httpMethod = method
            if method == "POST" { request.httpBody = Data("order=1".utf8) }
            manager.dataTask(with: request) { response in done.withLock { $0 = response } }.resume()
            XCTAssertEqual(received.wait(timeout: .now() + 30), .success, "the \(method) reached the server")
            // The route goes while the server holds its answer; the answer is then cut.
            try client.ip("route", "add", "unreachable", "\(Self.hostAddress)/32")
            answer.signal()
            if method == "POST" {
                XCTAssertTrue(waitUntil { done.withLock { $0 } != nil }, "the POST was left waiting for a route")
                guard case .networkLost = done.withLock({ $0 })?.error as? SessionError else {
                    return XCTFail("expected networkLost, got \(String(describing: done.withLock { $0 }?.error))")
                }
                XCTAssertFalse(events.recorded.contains("waiting"), "\(events.recorded)")
                try client.ip("route", "del", "unreachable", "\(Self.hostAddress)/32")
            } else {
                XCTAssertTrue(waitUntil { events.recorded.contains("waiting") }, "the GET waits: \(events.recorded)")
                try client.ip("route", "del", "unreachable", "\(Self.hostAddress)/32")
                XCTAssertEqual(received.wait(timeout: .now() + 30), .success, "the GET was sent again")
                answer.signal()
                XCTAssertTrue(waitUntil { done.withLock { $0 } != nil }, "the GET never completed")
            }
        }
        XCTAssertEqual(requests.withLock { $0 }, ["POST", "GET", "GET"], "the POST went out once")
    }

    /// The same wait asked for by the retrier: `RetryPolicy(waitsForConnectivity)` answers a
    /// connection failure with `.retryWhenConnected`, without the configuration's option.
    func testARetryPolicyRetriesWhenTheNetworkComesBack() throws {
        try connectAndSettle()
        let port = try startResponder()
        try client.ip("link", "set", "crl0", "down")
        let events = Events()
        let manager = try makeManager(waits: false, events: events)
        var policy = RetryPolicy()
        policy.waitsForConnectivity = true
        manager.requestRetrier = policy
        let done = Mutex<DataResponse?>(nil)
        let task = manager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):\(port)/")!)) { response in
            done.withLock { $0 = response }
        }
        task.resume()
        XCTAssertTrue(waitUntil { events.recorded.contains("waiting") }, "no waiting event: \(events.recorded)")
        XCTAssertNil(done.withLock { $0 }, "the retrier's wait must hold the task")
        try client.ip("link", "set", "crl0", "up")
        XCTAssertTrue(waitUntil { done.withLock { $0 } != nil }, "the task never completed")
        XCTAssertNil(done.withLock { $0 }?.error, "\(String(describing: done.withLock { $0 }?.error))")
        XCTAssertEqual(done.withLock { $0 }?.response?.statusCode, 200)
        XCTAssertTrue(waitUntil { events.hasEnded }, "no completion event: \(events.recorded)")
        XCTAssertEqual(events.recorded, ["willSend", "waiting", "willSend", "completed"])
    }

    func testTheResourceTimeoutEndsTheWait() throws {
        try connectAndSettle()
        try client.ip("link", "set", "crl0", "down")
        let events = Events()
        let manager = try makeManager(waits: true, resourceTimeout: 1, events: events)
        let done = Mutex<DataResponse?>(nil)
        let task = manager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):80/")!)) { response in
            done.withLock { $0 = response }
        }
        task.resume()
        XCTAssertTrue(waitUntil { done.withLock { $0 } != nil })
        guard case .timedOut = done.withLock({ $0 })?.error as? SessionError else {
            return XCTFail("expected timedOut, got \(String(describing: done.withLock { $0 }?.error))")
        }
        XCTAssertTrue(waitUntil { events.hasEnded }, "no completion event: \(events.recorded)")
        XCTAssertTrue(events.recorded.contains("waiting"))
        XCTAssertTrue(waitUntil { ConnectivityWait.runningMonitorCount == 0 }, "the route monitor must stop")
    }

    func testCancellingAWaitingTaskEndsItAndItsMonitor() throws {
        try connectAndSettle()
        try client.ip("link", "set", "crl0", "down")
        let events = Events()
        let manager = try makeManager(waits: true, events: events)
        let tasks = (0..<20).map { _ in
            manager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):80/")!), completionHandler: nil)
        }
        let completed = Mutex(0)
        for task in tasks { task.resume() }
        XCTAssertTrue(waitUntil { events.recorded.filter { $0 == "waiting" }.count == 20 })
        XCTAssertEqual(ConnectivityWait.runningMonitorCount, 1, "twenty waits share one monitor")
        for task in tasks { task.cancel() }
        XCTAssertTrue(waitUntil { tasks.allSatisfy { $0.state == .completed } })
        for task in tasks where (task.error as? SessionError) == .cancelled { completed.withLock { $0 += 1 } }
        XCTAssertEqual(completed.withLock { $0 }, 20)
        XCTAssertTrue(waitUntil { ConnectivityWait.runningMonitorCount == 0 }, "the route monitor must stop")
    }
}

extension WaitsForConnectivityTests {
    /// Tasks cancelled around the moment their wait finds no route: the monitors hear
    /// "waiting" before the task's end or not at all. The watcher told them itself, racing
    /// the cancel, and "waiting" could follow "failed".
    func testAWaitingNoticeNeverFollowsTheTasksEnd() throws {
        try connectAndSettle()
        try client.ip("link", "set", "crl0", "down")
        let events = Events()
        let manager = try makeManager(waits: true, events: events)
        var tasks: [DataTask] = []
        for round in 0..<30 {
            let batch = (0..<20).map { _ in
                manager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):80/")!), completionHandler: nil)
            }
            for task in batch { task.resume() }
            // Cancelled 0 to 2 ms apart, around the time the wait reads the routing table.
            for (index, task) in batch.enumerated() {
                usleep(useconds_t((index + round) % 3 * 1000))
                task.cancel()
            }
            tasks += batch
        }
        XCTAssertTrue(waitUntil { tasks.allSatisfy { $0.state == .completed } })
        XCTAssertTrue(
            waitUntil { ConnectivityWait.runningMonitorCount == 0 },
            "the route monitor must stop: \(manager.tasks.count) tasks left, \(events.recordedByTask.filter { !$0.value.contains("failed") })")
        // Every watcher has ended (and told whatever it told); the notices reach the monitors
        // through the driver and the monitor queue.
        let flushed = DispatchSemaphore(value: 0)
        manager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):80/")!)) { _ in flushed.signal() }.cancel()
        XCTAssertEqual(flushed.wait(timeout: .now() + 30), .success)
        XCTAssertTrue(waitUntil { events.recordedByTask.count >= tasks.count && events.recordedByTask.values.allSatisfy { $0.contains("failed") } })
        usleep(100_000)
        events.queue.sync {}
        for (identifier, names) in events.recordedByTask {
            if let end = names.firstIndex(of: "failed") {
                XCTAssertFalse(names[(end + 1)...].contains("waiting"), "task #\(identifier): \(names)")
            }
        }
    }
}

extension WaitsForConnectivityTests {
    /// No default route (the client namespace has only its veth subnet): a refused request to
    /// `localhost`, or over a Unix socket, has nothing to wait for, and its error stands at
    /// once. Both were judged by the default route and waited until the resource timeout.
    func testLoopbackNamesAndUnixSocketsDoNotWaitForADefaultRoute() throws {
        try connectAndSettle()
        try client.ip("link", "set", "lo", "up")
        let cases: [(url: String, socket: String?)] = [
            ("http://localhost:9/", nil), ("http://api.localhost:9/", nil), ("http://127.0.0.1:9/", nil),
            ("http://example.invalid/", "/nonexistent/curlew.sock"),
        ]
        for (url, socket) in cases {
            let events = Events()
            let manager = try makeManager(waits: true, resourceTimeout: 20, unixSocketPath: socket, events: events)
            let done = Mutex<DataResponse?>(nil)
            manager.dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: url)))) { response in
                done.withLock { $0 = response }
            }.resume()
            XCTAssertTrue(waitUntil { done.withLock { $0 } != nil }, url)
            guard case .cannotConnect = done.withLock({ $0 })?.error as? SessionError else {
                XCTFail("\(url): expected cannotConnect, got \(String(describing: done.withLock { $0 }?.error))")
                continue
            }
            XCTAssertTrue(waitUntil { events.hasEnded }, "\(url): no completion event: \(events.recorded)")
            XCTAssertFalse(events.recorded.contains("waiting"), "\(url): \(events.recorded)")
        }
    }
}

extension WaitsForConnectivityTests {
    /// The same address seen from two namespaces: none in the client's (its link down), the
    /// host's own in the host's. A task in the client waits for it; then a refused request
    /// from a manager in the host namespace must fail at once. One monitor was shared per
    /// address, started in the client's namespace, and the host's task waited for a route
    /// its namespace had all along.
    func testEachNetworkNamespaceIsJudgedByItsOwnRoutes() throws {
        try connectAndSettle()
        try client.ip("link", "set", "crl0", "down")
        try host.ip("link", "set", "lo", "up")
        let clientEvents = Events()
        let waiting = try makeManager(waits: true, events: clientEvents)
        let waitingTask = waiting.dataTask(
            with: URLRequest(url: URL(string: "http://\(Self.hostAddress):80/")!), completionHandler: nil)
        waitingTask.resume()
        XCTAssertTrue(waitUntil { clientEvents.recorded.contains("waiting") }, "no waiting event: \(clientEvents.recorded)")

        let hostEvents = Events()
        let hostManager: URLSessionManager = try host.perform {
            var configuration = SessionConfiguration.default
            configuration.proxy = .none
            configuration.waitsForConnectivity = true
            configuration.timeoutIntervalForResource = 20
            return URLSessionManager(configuration: configuration, eventMonitors: [hostEvents])
        }
        addTeardownBlock { hostManager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let done = Mutex<DataResponse?>(nil)
        hostManager.dataTask(with: URLRequest(url: URL(string: "http://\(Self.hostAddress):9/")!)) { response in
            done.withLock { $0 = response }
        }.resume()
        XCTAssertTrue(waitUntil { done.withLock { $0 } != nil })
        guard case .cannotConnect = done.withLock({ $0 })?.error as? SessionError else {
            return XCTFail("expected cannotConnect, got \(String(describing: done.withLock { $0 }?.error))")
        }
        XCTAssertTrue(waitUntil { hostEvents.hasEnded }, "no completion event: \(hostEvents.recorded)")
        XCTAssertFalse(hostEvents.recorded.contains("waiting"), "\(hostEvents.recorded)")
        waitingTask.cancel()
        XCTAssertTrue(waitUntil { ConnectivityWait.runningMonitorCount == 0 }, "the route monitors must stop")
    }
}

/// Counts the questions and never retries.
private final class CountingRetrier: RequestRetrier, @unchecked Sendable {  // `lock` guards `asked`
    private let lock = NSLock()
    private var asked = 0
    var count: Int { lock.withLock { asked } }
    func retry(_ task: SessionTask, attempt: Int, error: SessionError?, response: HTTPURLResponse?) -> RetryDecision {
        lock.withLock { asked += 1 }
        return .doNotRetry
    }
}
