import CurlewTestSupport
import Foundation
import Security
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// An HTTPS proxy's own certificate is judged as the proxy's (its authorities, its name),
/// never against the origin's policy and pins; the origin behind it still is.
final class HTTPSProxyTests: XCTestCase {
    /// A TLS forward proxy answering CONNECT (asyncio, on loopback), started per test.
    final class TLSConnectProxy: @unchecked Sendable {
        // @unchecked: `process` is set once in init and only terminated afterwards.
        let port: Int
        private let process: Process

        static let script = """
            import asyncio, ssl, sys, urllib.parse
            async def pump(reader, writer):
                try:
                    while True:
                        data = await reader.read(65536)
                        if not data:
                            break
                        writer.write(data)
                        await writer.drain()
                except Exception:
                    pass
                finally:
                    writer.close()
            async def handle(reader, writer):
                try:
                    head = await reader.readuntil(b"\\r\\n\\r\\n")
                    method, target, rest = head.split(b" ", 2)
                    if method == b"CONNECT":
                        host, port = target.decode().rsplit(":", 1)
                        up_reader, up_writer = await asyncio.open_connection(host, int(port))
                        writer.write(b"HTTP/1.1 200 Connection established\\r\\n\\r\\n")
                        await writer.drain()
                    else:
                        # A plain http request in absolute form: sent on to the origin in origin form.
                        url = urllib.parse.urlsplit(target.decode())
                        up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port or 80)
                        path = (url.path or "/") + ("?" + url.query if url.query else "")
                        version, fields = rest.split(b"\\r\\n", 1)
                        up_writer.write(method + b" " + path.encode() + b" " + version + b"\\r\\nVia: 1.1 test-proxy\\r\\n" + fields)
                        await up_writer.drain()
                    await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
                except Exception:
                    writer.close()
            async def main():
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(sys.argv[1], sys.argv[2])
                server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
                print(server.sockets[0].getsockname()[1], flush=True)
                async with server:
                    await server.serve_forever()
            asyncio.run(main())
            """

        init(certificateChain: URL, privateKey: URL) throws {
            process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", Self.script, certificateChain.path, privateKey.path]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                kill(process.processIdentifier, SIGKILL)
                throw SessionError.badServerResponse("the test proxy did not start: '\(line)'")
            }
            self.port = port
        }

        func stop() {
            // SIGKILL: a child of the test process may inherit an ignored SIGTERM.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// A manager whose proxy is the test proxy at `proxyPort` (or `setting`), trusting the
    /// test root for the proxy (`certificateAuthorityFile`) and, unless `pinning`, the origin.
    private func manager(
        proxyPort: Int, pinning: Bool, hsts: SessionConfiguration.StrictTransportSecurity = .disabled,
        setting: SessionConfiguration.Proxy? = nil
    ) throws -> URLSessionManager {
        let certificates = try TLSFixture.certificates()
        var configuration = SessionConfiguration.default
        configuration.strictTransportSecurity = hsts
        configuration.proxy = setting ?? .url("https://127.0.0.1:\(proxyPort)")
        configuration.certificateAuthorityFile = certificates.root.certificatePEM.path
        configuration.timeoutIntervalForRequest = 15
        let manager = URLSessionManager(configuration: configuration)
        var policy = try TLSFixture.trustingTestRoot()
        if pinning {
            // Pins the origin's key only: the proxy presents another key.
            policy = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [try TLSFixture.certificate(certificates.leaf)])
            policy.trustedRootCertificates = [try TLSFixture.certificate(certificates.root)]
        }
        manager.securityPolicy = policy
        return manager
    }

    /// A plain origin answering "plain" at `/plain`, and an HTTPS proxy with the test leaf's
    /// other key.
    private func plainOriginAndProxy() throws -> (TestServer, TLSConnectProxy) {
        let certificates = try TLSFixture.certificates()
        let origin = try TestServer()
        origin.route("/plain", response: .text("plain"))
        do {
            return (origin, try TLSConnectProxy(certificateChain: certificates.leafNewKey.chainPEM, privateKey: certificates.leafNewKey.privateKeyPEM))
        } catch {
            origin.shutdown()
            throw error
        }
    }

    /// Unsets the proxy variables (and `no_proxy`) and returns what puts them back. setenv races
    /// a getenv on another thread (glibc): they change only while no transfer of this process
    /// runs (earlier tests' managers are invalidated; the test's own are made after).
    private func clearProxyEnvironment() -> () -> Void {
        let names = SessionEngine.environmentProxyVariables + ["no_proxy", "NO_PROXY"]
        let saved = names.map { name in getenv(name).map { String(cString: $0) } }
        for name in names { unsetenv(name) }
        return { for (name, value) in zip(names, saved) { if let value { setenv(name, value, 1) } else { unsetenv(name) } } }
    }

    /// Gets `path` of the TLS `origin` (named localhost) through `manager`'s proxy, and checks
    /// that it succeeded and reached the origin through the tunnel.
    private func assertReached(
        _ origin: TestServer, _ path: String, through manager: URLSessionManager, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let url = try XCTUnwrap(URL(string: "https://localhost:\(try XCTUnwrap(origin.baseURL.port))\(path)"))
        let response = await manager.get(url)
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)", file: file, line: line)
        XCTAssertEqual(origin.requests.first?.path, path, "the request went through the tunnel", file: file, line: line)
    }

    func testThePinnedOriginIsReachedThroughAnHTTPSProxyWithAnotherCertificate() async throws {
        let certificates = try TLSFixture.certificates()
        let origin = try TLSFixture.server(certificates.leaf)
        defer { origin.shutdown() }
        let proxy = try TLSConnectProxy(
            certificateChain: certificates.leafNewKey.chainPEM, privateKey: certificates.leafNewKey.privateKeyPEM)
        defer { proxy.stop() }
        let manager = try manager(proxyPort: proxy.port, pinning: true)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        try await assertReached(origin, "/through", through: manager)
    }

    func testThePinsStillJudgeTheOriginBehindTheProxy() async throws {
        let certificates = try TLSFixture.certificates()
        let origin = try TLSFixture.server(certificates.leafNewKey)  // not the pinned key
        defer { origin.shutdown() }
        let proxy = try TLSConnectProxy(
            certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM)
        defer { proxy.stop() }
        let manager = try manager(proxyPort: proxy.port, pinning: true)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let url = try XCTUnwrap(URL(string: "https://localhost:\(try XCTUnwrap(origin.baseURL.port))/"))
        let response = await manager.get(url)
        XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .noPinMatched, "\(response.result)")
        XCTAssertEqual(origin.requests.count, 0)
    }

    func testAProxyWithAnUntrustedCertificateIsRefused() async throws {
        let certificates = try TLSFixture.certificates()
        let origin = try TLSFixture.server(certificates.leaf)
        defer { origin.shutdown() }
        let proxy = try TLSConnectProxy(
            certificateChain: certificates.unrelatedLeaf.chainPEM, privateKey: certificates.unrelatedLeaf.privateKeyPEM)
        defer { proxy.stop() }
        let manager = try manager(proxyPort: proxy.port, pinning: false)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let url = try XCTUnwrap(URL(string: "https://localhost:\(try XCTUnwrap(origin.baseURL.port))/"))
        let response = await manager.get(url)
        XCTAssertNotNil(response.error, "an untrusted proxy is never used")
        // Named as the proxy's failure (it was reported as the origin's host name check).
        let failure = TLSFixture.trustFailure(response)
        XCTAssertEqual(failure?.reason, .unknownIssuer, "\(response.result)")
        XCTAssertTrue(failure?.detail.hasPrefix("the HTTPS proxy is not trusted") ?? false, "\(response.result)")
        XCTAssertEqual(origin.requests.count, 0)
    }
    /// An HTTPS proxy named by `https_proxy` is judged as one set outright: its certificate
    /// against the system's authorities and `certificateAuthorityFile` (libcurl's own
    /// default bundle alone refused a proxy the configured file vouches for).
    func testAnHTTPSProxyFromTheEnvironmentIsTrustedThroughTheConfiguredAuthorities() async throws {
        let certificates = try TLSFixture.certificates()
        let origin = try TLSFixture.server(certificates.leaf)
        defer { origin.shutdown() }
        let proxy = try TLSConnectProxy(certificateChain: certificates.leafNewKey.chainPEM, privateKey: certificates.leafNewKey.privateKeyPEM)
        defer { proxy.stop() }
        let restore = clearProxyEnvironment()
        defer { restore() }
        setenv("https_proxy", "https://127.0.0.1:\(proxy.port)", 1)

        let manager = try manager(proxyPort: proxy.port, pinning: false, setting: .environment)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        try await assertReached(origin, "/through-env", through: manager)
    }

    /// The same through the environment's proxies, with pins for them: a plain request HSTS
    /// does not upgrade goes through `http_proxy`, not `https_proxy`, and that proxy's pins
    /// judge its handshake (a wrong pin refuses it; they were looked up under `https_proxy`'s
    /// host, found none, and let it through).
    func testAPlainRequestThroughTheEnvironmentsHTTPSProxyIsJudgedByThatProxysPins() async throws {
        let certificates = try TLSFixture.certificates()
        let (origin, proxy) = try plainOriginAndProxy()
        defer { origin.shutdown() }
        defer { proxy.stop() }
        let restore = clearProxyEnvironment()
        defer { restore() }
        setenv("http_proxy", "https://localhost:\(proxy.port)", 1)
        setenv("https_proxy", "https://127.0.0.2:9", 1)
        for (pin, passes) in [(try PerHostPinTests.pin(certificates.leaf), false), (try PerHostPinTests.pin(certificates.leafNewKey), true)] {
            var configuration = SessionConfiguration.default
            configuration.strictTransportSecurity = .inMemory
            configuration.proxy = .environment
            configuration.proxyPinningPolicy = PinningPolicy(pinSets: [PinSet(host: "localhost", pins: [pin])])
            configuration.certificateAuthorityFile = certificates.root.certificatePEM.path
            configuration.timeoutIntervalForRequest = 15
            let manager = URLSessionManager(configuration: configuration)
            manager.securityPolicy = try TLSFixture.trustingTestRoot()
            let response = await manager.get(try XCTUnwrap(URL(string: origin.baseURLString + "/plain")))
            await manager.waitUntilInvalidatedAfterUse()
            if passes {
                XCTAssertEqual(response.data, Data("plain".utf8), "\(response.result)")
            } else {
                XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .noPinMatched, "\(response.result)")
            }
        }
        XCTAssertEqual(origin.requests.count, 1, "only the request through the proxy whose pin passes arrives")
    }

    /// A plain http request through an HTTPS proxy, with HSTS on (so the request might have
    /// become https and the TLS checks are armed): the only TLS is the proxy's, judged as the
    /// proxy's. A review feared the admission check would take it for an unverified origin
    /// connection and refuse it: libcurl reports the proxy's TLS layer as the request's, and
    /// an origin given as an address passed only because the proxy's handshake was judged as
    /// the origin's.
    func testAPlainRequestThroughAnHTTPSProxyWithHSTSOnIsSent() async throws {
        let (origin, proxy) = try plainOriginAndProxy()
        defer { origin.shutdown() }
        defer { proxy.stop() }
        // An origin given as an address and one given as a name (libcurl then reports the
        // proxy's TLS layer as the request's, which admission must not take for the origin's).
        let urls = [origin.baseURLString + "/plain", "http://localhost:\(origin.port)/plain"]
        for url in urls {
            for hsts in [SessionConfiguration.StrictTransportSecurity.disabled, .inMemory] {
                let manager = try manager(proxyPort: proxy.port, pinning: false, hsts: hsts)
                let response = await manager.get(try XCTUnwrap(URL(string: url)))
                XCTAssertEqual(response.data, Data("plain".utf8), "\(url), HSTS \(hsts): \(response.result)")
                await manager.waitUntilInvalidatedAfterUse()
            }
        }
        XCTAssertEqual(origin.requests.count, 4)
        XCTAssertEqual(origin.requests.map { $0.headers.first { $0.name == "Via" }?.value }, Array(repeating: "1.1 test-proxy", count: 4), "all went through the proxy")
    }
}
