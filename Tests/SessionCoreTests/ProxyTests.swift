import CurlewTestSupport
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Proxies: the in-process test server plays an HTTP forward proxy (it answers absolute-form
/// requests itself), asking for credentials with 407 like a real one.
final class ProxyTests: XCTestCase {
    var proxy: TestServer!

    override func setUp() async throws {
        proxy = try TestServer()
        // "proxy:secret" in Basic; anything else is asked for credentials.
        proxy.setDefaultHandler { request in
            let authorization = request.headers.first { $0.name.lowercased() == "proxy-authorization" }?.value
            guard authorization == "Basic cHJveHk6c2VjcmV0" else {
                return TestResponse(
                    status: 407, headers: [("Proxy-Authenticate", "Basic realm=\"proxy\"")], body: Data("who?".utf8))
            }
            return .text("proxied \(request.uri)")
        }
    }

    override func tearDown() async throws {
        proxy.shutdown()
    }

    private func get(_ url: String, with configuration: SessionConfiguration) async throws -> DataResponse {
        let manager = URLSessionManager.raw(configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        return await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: url))))
    }

    func testACredentialIsSentToTheProxyWithTheFirstRequest() async throws {
        var configuration = SessionConfiguration.default
        configuration.proxy = .url(proxy.baseURLString)
        configuration.proxyCredential = URLCredential(user: "proxy", password: "secret", persistence: .none)
        let response = try await get("http://origin.invalid/hello?x=1", with: configuration)
        XCTAssertEqual(response.response?.statusCode, 200)
        XCTAssertEqual(response.data.map { String(decoding: $0, as: UTF8.self) }, "proxied http://origin.invalid/hello?x=1")
        XCTAssertEqual(proxy.requests.count, 1, "Basic with the first request: no 407 round trip")
    }

    /// The proxy options are set once per pooled handle (until it is reset): a handle reused
    /// without a reset still goes through the proxy, with its credential.
    func testAReusedHandleStillGoesThroughTheProxy() async throws {
        var configuration = SessionConfiguration.default
        configuration.proxy = .url(proxy.baseURLString)
        configuration.proxyCredential = URLCredential(user: "proxy", password: "secret", persistence: .none)
        configuration.httpMaximumConnectionsPerHost = 1
        let manager = URLSessionManager.raw(configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        for index in 0..<4 {
            let response = await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: "http://origin.invalid/\(index)"))))
            XCTAssertEqual(response.response?.statusCode, 200, "request \(index)")
            XCTAssertEqual(response.data.map { String(decoding: $0, as: UTF8.self) }, "proxied http://origin.invalid/\(index)")
            if index > 0 { XCTAssertTrue(response.metrics?.isReusedConnection ?? false, "request \(index) opened a connection") }
        }
        XCTAssertEqual(proxy.requests.count, 4)
    }

    func testCredentialsInTheProxyURLWork() async throws {
        var configuration = SessionConfiguration.default
        configuration.proxy = .url("http://proxy:secret@\(try XCTUnwrap(proxy.baseURL.host)):\(try XCTUnwrap(proxy.baseURL.port))")
        let response = try await get("http://origin.invalid/a", with: configuration)
        XCTAssertEqual(response.response?.statusCode, 200)
    }

    func testAWrongCredentialDeliversTheProxys407() async throws {
        var configuration = SessionConfiguration.default
        configuration.proxy = .url(proxy.baseURLString)
        configuration.proxyCredential = URLCredential(user: "proxy", password: "wrong", persistence: .none)
        let response = try await get("http://origin.invalid/a", with: configuration)
        XCTAssertEqual(response.response?.statusCode, 407)
        XCTAssertEqual(response.data, Data("who?".utf8))
    }

    func testTheBypassListGoesDirect() async throws {
        let origin = try TestServer()
        defer { origin.shutdown() }
        origin.route("/direct", response: .text("direct"))
        var configuration = SessionConfiguration.default
        configuration.proxy = .url(proxy.baseURLString)
        configuration.proxyCredential = URLCredential(user: "proxy", password: "secret", persistence: .none)
        configuration.proxyBypassList = ["127.0.0.0/8", " example.invalid "]
        let direct = try await get(origin.baseURLString + "/direct", with: configuration)
        XCTAssertEqual(direct.data, Data("direct".utf8))
        XCTAssertEqual(proxy.requests.count, 0, "the bypassed host never reached the proxy")
        let proxied = try await get("http://other.invalid/b", with: configuration)
        XCTAssertEqual(proxied.response?.statusCode, 200)
        XCTAssertGreaterThan(proxy.requests.count, 0)
    }

    /// IPv6 entries and `*` in a list: libcurl 7.88 matches neither (a bracketed address, an
    /// IPv6 range, `*` beside other entries all sent the request to the proxy). A bypassed
    /// request goes direct, here to a closed port: refused, and the proxy saw nothing.
    func testIPv6EntriesAndAStarInAListBypassTheProxy() async throws {
        var configuration = SessionConfiguration.default
        configuration.proxy = .url(proxy.baseURLString)
        configuration.proxyCredential = URLCredential(user: "proxy", password: "secret", persistence: .none)
        let cases: [(list: [String], url: String)] = [
            (["[::1]"], "http://[::1]:9/a"),
            (["::1/128"], "http://[::1]:9/b"),
            (["example.invalid", "::/0"], "http://[::1]:9/c"),
            (["::1"], "http://[0:0:0::1]:9/d"),
            (["[0:0::1]/127"], "http://[::1]:9/e"),
            (["localhost", "*"], "http://127.0.0.1:9/f"),
        ]
        for (list, url) in cases {
            configuration.proxyBypassList = list
            let response = try await get(url, with: configuration)
            XCTAssertNotNil(response.error, "\(list) \(url): went through the proxy: \(String(describing: response.data.map { String(decoding: $0, as: UTF8.self) }))")
            XCTAssertEqual(proxy.requests.count, 0, "\(list) \(url)")
        }
        // A range that does not hold the host still goes through the proxy.
        configuration.proxyBypassList = ["fd00::/8", "example.invalid"]
        let proxied = try await get("http://[::1]:9/g", with: configuration)
        XCTAssertEqual(proxied.response?.statusCode, 200, "\(proxied.result)")
        XCTAssertEqual(proxy.requests.count, 1)
    }

    /// The bypass meets a redirect: a proxied answer redirecting to a bypassed IPv6 host is
    /// followed direct (each hop is judged by its own host), not through the proxy again.
    func testARedirectToABypassedIPv6HostGoesDirect() async throws {
        proxy.setDefaultHandler { request in
            request.uri.hasSuffix("/hop") ? .redirect(to: "http://[::1]:9/after") : .text("proxied \(request.uri)")
        }
        var configuration = SessionConfiguration.default
        configuration.proxy = .url(proxy.baseURLString)
        configuration.proxyBypassList = ["::1"]
        let response = try await get("http://other.invalid/hop", with: configuration)
        XCTAssertNotNil(response.error, "the redirect went through the proxy: \(response.result)")
        XCTAssertEqual(proxy.requests.map(\.uri), ["http://other.invalid/hop"])
    }

    func testTheBypassListSplitsBetweenLibcurlAndIPv6Ranges() {
        let list = ProxyBypassList([" example.com ", "[2001:db8::]/32", "10.0.0.0/8", "", "::1"])
        XCTAssertEqual(list.noProxy, "example.com,10.0.0.0/8")
        XCTAssertTrue(list.bypasses(host: "2001:db8:ffff::1"))
        XCTAssertTrue(list.bypasses(host: "[2001:DB8::]"))
        XCTAssertFalse(list.bypasses(host: "2001:db9::1"))
        XCTAssertTrue(list.bypasses(host: "0::0:1"))
        XCTAssertFalse(list.bypasses(host: "::2"))
        XCTAssertFalse(list.bypasses(host: "example.com"), "names are libcurl's")
        XCTAssertEqual(ProxyBypassList(["a", "*", "b"]).noProxy, "*")
        XCTAssertFalse(ProxyBypassList(["a"]).hasAddressRanges)
        XCTAssertEqual(ProxyBypassList(["::1/129", "fe80::1%eth0"]).noProxy, "::1/129,fe80::1%eth0", "not an address or range: left to libcurl")
        XCTAssertEqual(ProxyBypassList(["[::1]", "fd00::/8"]).noProxy, "", "a list of IPv6 entries still replaces the environment's")
        XCTAssertNil(ProxyBypassList([]).noProxy)
        let edges = ProxyBypassList(["8000::/1"])
        XCTAssertTrue(edges.bypasses(host: "ffff::1"))
        XCTAssertFalse(edges.bypasses(host: "7fff::1"))
    }

    /// `.environment` reads the proxy variables when the manager is made: a manager made
    /// while none is set goes direct for its whole life; one made after `http_proxy` is set
    /// uses that proxy (libcurl reads the variables for it, per request).
    func testTheEnvironmentIsReadWhenTheManagerIsMade() async throws {
        // setenv races a getenv on another thread (glibc): the variables change only while no
        // transfer of this process runs (the managers of earlier tests are invalidated, and
        // this test's own are idle or not made yet).
        let names = SessionEngine.environmentProxyVariables + ["no_proxy", "NO_PROXY"]
        let saved = names.map { name in getenv(name).map { String(cString: $0) } }
        defer { for (name, value) in zip(names, saved) { if let value { setenv(name, value, 1) } else { unsetenv(name) } } }
        for name in names { unsetenv(name) }
        let origin = try TestServer()
        defer { origin.shutdown() }
        origin.route("/direct", response: .text("direct"))

        let before = URLSessionManager.raw(.default)
        defer { before.invalidateSessionCancelingTasks(true, resetSession: false) }
        let host = try XCTUnwrap(proxy.baseURL.host)
        let port = try XCTUnwrap(proxy.baseURL.port)
        setenv("http_proxy", "http://proxy:secret@\(host):\(port)", 1)
        let after = URLSessionManager.raw(.default)
        defer { after.invalidateSessionCancelingTasks(true, resetSession: false) }

        let direct = await before.response(for: URLRequest(url: try XCTUnwrap(URL(string: origin.baseURLString + "/direct"))))
        XCTAssertEqual(direct.data, Data("direct".utf8))
        XCTAssertEqual(proxy.requests.count, 0, "made before http_proxy was set: no proxy")
        let proxied = await after.response(for: URLRequest(url: try XCTUnwrap(URL(string: "http://origin.invalid/env"))))
        XCTAssertEqual(proxied.response?.statusCode, 200)
        XCTAssertEqual(proxied.data.map { String(decoding: $0, as: UTF8.self) }, "proxied http://origin.invalid/env")
    }

    /// A bypass list replaces the environment's `no_proxy`, also when all its entries are IPv6
    /// (which Curlew matches itself): `localhost`, bypassed by `no_proxy`, then goes through
    /// the environment's proxy, while the list's `::1` goes direct.
    func testABypassListOfIPv6EntriesReplacesTheEnvironmentsNoProxy() async throws {
        // setenv races a getenv on another thread (glibc): see the test above.
        let names = SessionEngine.environmentProxyVariables + ["no_proxy", "NO_PROXY"]
        let saved = names.map { name in getenv(name).map { String(cString: $0) } }
        defer { for (name, value) in zip(names, saved) { if let value { setenv(name, value, 1) } else { unsetenv(name) } } }
        for name in names { unsetenv(name) }
        let host = try XCTUnwrap(proxy.baseURL.host)
        let port = try XCTUnwrap(proxy.baseURL.port)
        setenv("http_proxy", "http://proxy:secret@\(host):\(port)", 1)
        setenv("no_proxy", "localhost", 1)
        var configuration = SessionConfiguration.default
        configuration.proxy = .environment
        configuration.proxyBypassList = ["::1"]
        let manager = URLSessionManager.raw(configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let proxied = await manager.response(for: URLRequest(url: try XCTUnwrap(URL(string: "http://localhost:9/env"))))
        XCTAssertEqual(proxied.data.map { String(decoding: $0, as: UTF8.self) }, "proxied http://localhost:9/env", "\(proxied.result)")
        XCTAssertEqual(proxy.requests.count, 1)
    }

    /// The response cache meets the proxy's credential: libcurl sends it as
    /// `Proxy-Authorization` itself, so the request's fields do not show it, yet a proxy may
    /// answer one account and not another. Alice's answer (fresh for ten minutes) is not
    /// Bob's: a manager with Bob's credential on the same cache asks the proxy.
    func testAnAnswerThroughTheProxyIsNotAnotherProxyUsersFromTheCache() async throws {
        let accounts = try TestServer()
        defer { accounts.shutdown() }
        accounts.setDefaultHandler { request in
            let authorization = request.headers.first { $0.name.lowercased() == "proxy-authorization" }?.value ?? "none"
            return TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data(authorization.utf8))
        }
        let cache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 0)
        var bodies: [String] = []
        for user in ["alice", "bob"] {
            var configuration = SessionConfiguration.default
            configuration.proxy = .url(accounts.baseURLString)
            configuration.proxyCredential = URLCredential(user: user, password: "pw", persistence: .none)
            configuration.responseCache = cache
            let response = try await get("http://origin.invalid/r", with: configuration)
            bodies.append(response.data.map { String(decoding: $0, as: UTF8.self) } ?? "\(response.result)")
        }
        let expected = ["alice", "bob"].map { "Basic " + Data("\($0):pw".utf8).base64EncodedString() }
        XCTAssertEqual(bodies, expected)
        XCTAssertEqual(accounts.requests.count, 2)
    }

    func testNoneNeverUsesAProxy() async throws {
        let origin = try TestServer()
        defer { origin.shutdown() }
        origin.route("/direct", response: .text("direct"))
        var configuration = SessionConfiguration.default
        configuration.proxy = .none
        let response = try await get(origin.baseURLString + "/direct", with: configuration)
        XCTAssertEqual(response.data, Data("direct".utf8))
        XCTAssertEqual(proxy.requests.count, 0)
    }
}
