import CurlewTestSupport
import Foundation
import Glibc
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Name resolution that fails or is slow, against a resolver the test controls: each test
/// runs in a child process (the same xctest binary) inside a private network and mount
/// namespace (`unshare -rnm`), whose `/etc/resolv.conf` names a tiny UDP DNS responder on
/// that namespace's loopback. Names under `curlew.test` behave by their first label: `ok`
/// answers 127.0.0.1, `slow` answers it after 1.5 s, `nx` NXDOMAIN, `fail` SERVFAIL, and a
/// label starting with `mute` is never answered (the resolver gives up after 4 s). Malformed
/// answers: `trunc` sets the truncation bit (the resolver retries over TCP, which nothing
/// serves), `cutrr` ends inside its answer record, `loop` names its answer by a compression
/// pointer to itself, `longrd` claims 400 bytes of address data it does not have, and
/// `garbage` is the query's id followed by bytes that are no DNS message. Nothing leaves the namespace; the host's resolver is untouched.
final class FaultDNSTests: XCTestCase {
    private static let childKey = "CURLEW_DNS_NAMESPACE_TEST"

    /// The responder (Python, standard library only): one thread per delayed answer.
    private static let responder = """
        import socket, struct, sys, threading, time
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 53))
        print("ready", flush=True)
        def answer(query, peer, delay):
            if delay:
                time.sleep(delay)
            ident, flags = struct.unpack(">HH", query[:4])
            labels, i = [], 12
            while query[i]:
                labels.append(query[i + 1:i + 1 + query[i]].decode().lower())
                i += 1 + query[i]
            qtype = struct.unpack(">H", query[i + 1:i + 3])[0]
            question = query[12:i + 5]
            first = labels[0] if labels else ""
            rcode = {"nx": 3, "fail": 2}.get(first, 0)
            flags = 0x8180 | rcode
            answers = b""
            if rcode == 0 and qtype == 1:
                answers = b"\\xc0\\x0c" + struct.pack(">HHIH", 1, 1, 5, 4) + socket.inet_aton("127.0.0.1")
            if first == "trunc":
                flags |= 0x0200
                answers = b""
            elif first == "cutrr":
                answers = answers[:7]
            elif first == "loop":
                here = len(question) + 12
                answers = bytes([0xC0 | (here >> 8), here & 0xFF]) + answers[2:]
            elif first == "longrd":
                answers = answers[:10] + struct.pack(">H", 400) + answers[12:]
            count = 1 if answers else 0
            if first == "trunc" or first == "garbage":
                count = 0
            header = struct.pack(">HHHHHH", ident, flags, 1, count, 0, 0)
            if first == "garbage":
                sock.sendto(header[:2] + bytes(range(7, 60)), peer)
                return
            sock.sendto(header + question + answers, peer)
        while True:
            query, peer = sock.recvfrom(512)
            first = query[13:13 + query[12]].decode().lower() if len(query) > 13 else ""
            if first.startswith("mute"):
                continue
            delay = 1.5 if first == "slow" else 0
            threading.Thread(target=answer, args=(query, peer, delay), daemon=True).start()
        """

    /// In the parent: runs this test in a namespaced child and reports its result. In the
    /// child: true, and the caller runs the test body.
    private func isInNamespace(file: StaticString = #filePath, line: UInt = #line) throws -> Bool {
        let method = name.split(separator: ".").last.map(String.init) ?? name
        let identifier = "\(String(reflecting: type(of: self)))/\(method)"
        if ProcessInfo.processInfo.environment[Self.childKey] == identifier { return true }
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let resolvConf = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-resolv-\(UUID().uuidString)")
        try Data("nameserver 127.0.0.1\noptions timeout:4 attempts:1\n".utf8).write(to: resolvConf)
        defer { try? FileManager.default.removeItem(at: resolvConf) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = [
            "-rnm", "/bin/sh", "-c",
            "ip link set lo up && mount --bind \"$0\" /etc/resolv.conf && exec \"$1\" \"$2\"",
            resolvConf.path, executable, identifier,
        ]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.childKey] = identifier
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw XCTSkip("cannot start a namespaced child (unshare): \(error)")
        }
        // Bounded by the child's own request timeouts (at most 15 s per request).
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let testName = name
        if !text.contains("Test Case '\(testName)'") && process.terminationStatus != 0 {
            // The namespaces could not be made (no user namespaces here): nothing was tested.
            throw XCTSkip("no private network namespace for the DNS responder: \(text.prefix(300))")
        }
        let passed = text.contains("Test Case '\(testName)' passed")
        if !passed || process.terminationStatus != 0 {
            let failures = text.split(separator: "\n").filter { $0.contains(": error: ") || $0.contains("unshare") || $0.contains("mount") }
            XCTFail("the namespaced child (status \(process.terminationStatus)) failed: \(failures.joined(separator: "\n")) \(failures.isEmpty ? String(text.suffix(3000)) : "")", file: file, line: line)
        }
        return false
    }

    /// Starts the responder in this (namespaced) process; stopped at tear-down.
    private func startResponder() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.responder]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        addTeardownBlock {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        guard line.hasPrefix("ready") else { throw SessionError.badServerResponse("the DNS responder did not start: '\(line)'") }
    }

    /// Answers every request "hello" (raw sockets: the SwiftNIO test server's connections are
    /// reset inside `unshare -r`'s user namespace).
    private func helloServer() throws -> ScriptedServer {
        try ScriptedServer { socket, server in
            while server.readHead(socket) != nil {
                server.write(socket, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            }
        }
    }

    private func manager() -> URLSessionManager {
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        configuration.timeoutIntervalForRequest = 15
        let manager = URLSessionManager.raw(configuration)
        addTeardownBlock { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        return manager
    }

    private func get(_ manager: URLSessionManager, host: String, port: Int) async throws -> DataResponse {
        await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: "http://\(host):\(port)/hello"))))
    }

    func testNXDOMAINAndSERVFAILAreDNSFailures() async throws {
        guard try isInNamespace() else { return }
        try startResponder()
        let server = try helloServer()
        defer { server.stop() }
        let manager = manager()
        let found = try await get(manager, host: "ok.curlew.test", port: Int(server.port))
        XCTAssertEqual(found.data, Data("hello".utf8), "the responder answers: \(String(describing: found.error))")
        for host in ["nx.curlew.test", "fail.curlew.test"] {
            let response = try await get(manager, host: host, port: Int(server.port))
            guard case .dnsFailure(let message)? = response.error as? SessionError else {
                XCTFail("\(host): expected dnsFailure, got \(String(describing: response.error))")
                continue
            }
            XCTAssertTrue(message.contains(host), message)
        }
        XCTAssertEqual(server.acceptedCount, 1, "only the resolved name reached the server")
    }

    /// Answers a resolver must not trust — cut short, self-referencing, lying about their
    /// length, truncated, or not DNS at all — fail the lookup as a DNS failure (no crash, no
    /// address made up, no hang), and the manager's next lookup works.
    func testMalformedAnswersAreDNSFailuresAndTheNextLookupWorks() async throws {
        guard try isInNamespace() else { return }
        try startResponder()
        let server = try helloServer()
        defer { server.stop() }
        let manager = manager()
        for host in ["trunc", "cutrr", "loop", "longrd", "garbage"].map({ "\($0).curlew.test" }) {
            let response = try await get(manager, host: host, port: Int(server.port))
            guard case .dnsFailure? = response.error as? SessionError else {
                XCTFail("\(host): expected dnsFailure, got \(String(describing: response.error)) \(String(describing: response.data))")
                continue
            }
        }
        XCTAssertEqual(server.acceptedCount, 0, "no malformed answer led anywhere")
        let found = try await get(manager, host: "ok.curlew.test", port: Int(server.port))
        XCTAssertEqual(found.data, Data("hello".utf8), "the next lookup: \(String(describing: found.error))")
    }

    func testAResolverThatNeverAnswersIsADNSFailureNotAHang() async throws {
        guard try isInNamespace() else { return }
        try startResponder()
        let response = try await get(manager(), host: "mute.curlew.test", port: 80)
        guard case .dnsFailure? = response.error as? SessionError else {
            return XCTFail("expected dnsFailure, got \(String(describing: response.error))")
        }
    }

    /// A slow answer still arrives. A task cancelled while its name is being looked up ends
    /// at once, and the manager's other transfers go on meanwhile: a request to an address
    /// (no lookup) completes while another lookup, started before the cancel, is still
    /// waiting for its never-coming answer (an ordering, not a time).
    func testASlowAnswerArrivesAndACancelDuringTheLookupHoldsNothingUp() async throws {
        guard try isInNamespace() else { return }
        try startResponder()
        let server = try helloServer()
        defer { server.stop() }
        let manager = manager()
        let slow = try await get(manager, host: "slow.curlew.test", port: Int(server.port))
        XCTAssertEqual(slow.data, Data("hello".utf8), "\(String(describing: slow.error))")

        let marker = ResponseBox()
        let markerDone = expectation(description: "marker")
        let markerTask = manager.dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "http://mute-marker.curlew.test:\(Int(server.port))/")))) {
            marker.set($0)
            markerDone.fulfill()
        }
        markerTask.resume()
        let cancelled = ResponseBox()
        let cancelledDone = expectation(description: "cancelled")
        let task = manager.dataTask(with: URLRequest(url: try XCTUnwrap(URL(string: "http://mute.curlew.test:\(Int(server.port))/")))) {
            cancelled.set($0)
            cancelledDone.fulfill()
        }
        task.resume()
        try await Task.sleep(nanoseconds: 300_000_000)  // into the lookups (they give up at 4 s)
        task.cancel()
        let direct = try await get(manager, host: "127.0.0.1", port: Int(server.port))
        XCTAssertEqual(direct.data, Data("hello".utf8), "\(String(describing: direct.error))")
        XCTAssertNil(marker.get(), "the manager was held up until the lookups gave up: \(String(describing: marker.get()?.error))")
        await fulfillment(of: [cancelledDone], timeout: 30)
        XCTAssertEqual(cancelled.get()?.error as? SessionError, .cancelled)
        markerTask.cancel()
        await fulfillment(of: [markerDone], timeout: 30)
    }
}

/// A response set on one queue and read on another.
private final class ResponseBox: Sendable {
    private let value = Mutex<DataResponse?>(nil)
    func set(_ response: DataResponse) { value.withLock { $0 = response } }
    func get() -> DataResponse? { value.withLock { $0 } }
}
