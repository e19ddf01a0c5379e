import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Cookies through real transfers: libcurl's engine scopes them by path, `Secure` and public
/// suffix, stores them from redirects, keeps one jar per manager unless one is shared, and
/// honours the switches that turn cookies off.
///
/// Host names other than 127.0.0.1 (which libcurl treats as a secure context, so `Secure`
/// cookies do go there over http) are reached without DNS by using the test server as an
/// HTTP proxy: it receives absolute-form requests (`GET http://www.example.com/x`).
final class CookieTransferTests: XCTestCase {
    private func url(_ string: String) throws -> URL {
        try XCTUnwrap(URL(string: string))
    }

    /// A test server answering every request, also as a proxy for any host name: `respond`
    /// gets the request's host ("127.0.0.1" when not proxied) and path.
    private func server(
        _ respond: @escaping @Sendable (_ host: String, _ path: String) -> [String] = { _, _ in [] }
    ) throws -> TestServer {
        try TestServer { request in
            let target = URL(string: request.uri)
            let host = target?.host ?? "127.0.0.1"
            let path = target?.path ?? request.path
            var response = TestResponse.text("ok")
            response.headers += respond(host, path).map { ("Set-Cookie", $0) }
            return response
        }
    }

    private func proxied(through server: TestServer, _ configuration: SessionConfiguration = .default) throws -> SessionConfiguration {
        var configuration = configuration
        configuration.proxy = .url(server.baseURLString)
        return configuration
    }

    /// A manager proxied through `server` whose jar holds the cookie `aside=secret` of
    /// `a.example.com` (the Host-field tests).
    private func managerWithASideCookie(through server: TestServer) throws -> (URLSessionManager, CookieJar) {
        let manager = URLSessionManager.raw(try proxied(through: server))
        let jar = try XCTUnwrap(manager.cookieJar)
        try jar.add(Cookie(name: "aside", value: "secret", domain: "a.example.com"))
        return (manager, jar)
    }

    /// The `Cookie` headers of the server's last request.
    private func lastCookieHeaders(_ server: TestServer) -> [String]? {
        server.requests.last?.headerValues("Cookie")
    }

    private func httpbinCookies(_ response: DataResponse) throws -> [String: String] {
        let body = try json(response.data)
        return try XCTUnwrap(body["cookies"] as? [String: String], "\(body)")
    }

    // MARK: - Scope

    func testSecureCookieIsNeitherStoredFromHTTPNorSentOverHTTP() async throws {
        let server = try server { _, path in path == "/set" ? ["plain=1; Path=/", "sec=1; Secure; Path=/"] : [] }
        defer { server.shutdown() }
        let manager = URLSessionManager.raw(try proxied(through: server))
        let jar = try XCTUnwrap(manager.cookieJar)
        try jar.add(Cookie(name: "apisec", value: "1", domain: "www.example.com", isSecure: true))

        _ = await manager.get(try url("http://www.example.com/set"))
        let response = await manager.get(try url("http://www.example.com/cookies"))
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(lastCookieHeaders(server), ["plain=1"], "no Secure cookie over http://")
        XCTAssertEqual(Set(jar.cookies.map(\.name)), ["plain", "apisec"], "a Secure cookie from http:// is refused")
        await manager.waitUntilInvalidatedAfterUse()
    }

    func testPathScopedCookieIsSentOnlyUnderItsPath() async throws {
        let server = try server { _, path in path == "/set" ? ["admin=1; Path=/admin", "root=1; Path=/"] : [] }
        defer { server.shutdown() }
        let manager = URLSessionManager.raw()
        _ = await manager.get(try server.url("/set"))
        _ = await manager.get(try server.url("/cookies"))
        XCTAssertEqual(lastCookieHeaders(server), ["root=1"])
        _ = await manager.get(try server.url("/administrator"))
        XCTAssertEqual(lastCookieHeaders(server), ["root=1"], "a path matches at a '/' boundary only")
        _ = await manager.get(try server.url("/admin/x"))
        XCTAssertEqual(lastCookieHeaders(server), ["admin=1; root=1"], "longer paths first (RFC 6265 §5.4)")
        await manager.waitUntilInvalidatedAfterUse()
    }

    func testCookiesForPublicSuffixesAreRefused() async throws {
        let server = try server { host, path in
            guard path == "/set" else { return [] }
            switch host {
            case "www.example.co.uk": return ["uk=1; Domain=co.uk", "site=2; Domain=example.co.uk"]
            case "www.example.com": return ["tld=3; Domain=com", "org=4; Domain=example.com"]
            default: return []
            }
        }
        defer { server.shutdown() }
        let manager = URLSessionManager.raw(try proxied(through: server))
        _ = await manager.get(try url("http://www.example.co.uk/set"))
        _ = await manager.get(try url("http://www.example.com/set"))
        _ = await manager.get(try url("http://shop.example.co.uk/"))
        XCTAssertEqual(lastCookieHeaders(server), ["site=2"])
        _ = await manager.get(try url("http://api.example.com/"))
        XCTAssertEqual(lastCookieHeaders(server), ["org=4"])
        _ = await manager.get(try url("http://www.other.co.uk/"))
        XCTAssertEqual(lastCookieHeaders(server), [], "no supercookie reaches another site")
        XCTAssertEqual(Set(manager.cookieJar?.cookies.map(\.name) ?? []), ["site", "org"])
        await manager.waitUntilInvalidatedAfterUse()
    }

    // MARK: - Redirects

    func testCookieSetByRedirectIsSentOnTheNextHop() async throws {
        let manager = URLSessionManager.raw()
        let response = await manager.get(try Peer.url("/cookies/set?flavour=oatmeal&n=2"))
        XCTAssertEqual(response.response?.url?.path, "/cookies")
        XCTAssertEqual(try httpbinCookies(response), ["flavour": "oatmeal", "n": "2"])
        let deleted = await manager.get(try Peer.url("/cookies/delete?flavour"))
        XCTAssertEqual(try httpbinCookies(deleted), ["n": "2"], "an expiring Set-Cookie in a 302 removes it")
        XCTAssertEqual(manager.cookieJar?.cookies.map(\.name), ["n"])
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// A caller's `Host` field names the first origin; libcurl picks the jar's cookies by it.
    /// A redirect to another host goes without the field, so that host gets neither the first
    /// one's name nor its cookies, and its own cookies are stored for itself.
    func testARedirectToAnotherHostLeavesTheCallersHostFieldBehind() async throws {
        let server = try TestServer { request in
            let target = URL(string: request.uri)
            switch target?.path {
            case "/go": return TestResponse(status: 302, headers: [("Location", "http://b.example.com/land")])
            case "/land": return TestResponse(status: 200, headers: [("Set-Cookie", "bside=1; Path=/")])
            default: return .text("ok")
            }
        }
        defer { server.shutdown() }
        let (manager, jar) = try managerWithASideCookie(through: server)
        var request = URLRequest(url: try url("http://a.example.com/go"))
        request.setValue("a.example.com", forHTTPHeaderField: "Host")
        let response = await manager.response(for: request)
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        let requests = server.requests
        XCTAssertEqual(requests.map { URL(string: $0.uri)?.path }, ["/go", "/land"])
        XCTAssertEqual(requests.first?.headerValues("Cookie"), ["aside=secret"], "the first host's cookie goes to it")
        XCTAssertEqual(requests.last?.headerValues("Host"), ["b.example.com"])
        XCTAssertEqual(requests.last?.headerValues("Cookie"), [], "nothing of the first host's jar goes to the second")
        XCTAssertEqual(
            Set(jar.cookies.map { "\($0.name)@\($0.domain)" }), ["aside@a.example.com", "bside@b.example.com"],
            "the second host's cookie is stored for it")
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// libcurl before 8.20 keeps a `Host` field's name on the easy handle for good (neither a
    /// later transfer nor `curl_easy_reset` clears it) and picks the jar's cookies by it: the
    /// next request the handle carried, to another host and naming none, got the first host's
    /// cookies, and its own response's were stored for the first host.
    func testALaterRequestGetsNoCookiesOfAnEarlierRequestsHostField() async throws {
        let server = try TestServer { request in
            URL(string: request.uri)?.host == "b.example.com"
                ? TestResponse(status: 200, headers: [("Set-Cookie", "bside=1; Path=/")]) : .text("ok")
        }
        defer { server.shutdown() }
        let (manager, jar) = try managerWithASideCookie(through: server)
        var first = URLRequest(url: try url("http://a.example.com/"))
        first.setValue("a.example.com", forHTTPHeaderField: "Host")
        for request in [first, URLRequest(url: try url("http://b.example.com/")), URLRequest(url: try url("http://b.example.com/again"))] {
            let response = await manager.response(for: request)
            XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        }
        XCTAssertEqual(server.requests.map { $0.headerValues("Cookie") }, [["aside=secret"], [], ["bside=1"]])
        XCTAssertEqual(Set(jar.cookies.map { "\($0.name)@\($0.domain)" }), ["aside@a.example.com", "bside@b.example.com"])
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// The same when the redirection hook sends a request of its own without the field: the
    /// handle still carries the first request's name, and the hop names its own authority.
    func testAHookMadeHopWithoutAHostFieldGetsNoCookiesOfTheFirstHost() async throws {
        let server = try TestServer { request in
            switch URL(string: request.uri)?.path {
            case "/go": return TestResponse(status: 302, headers: [("Location", "http://b.example.com/land")])
            default: return .text("ok")
            }
        }
        defer { server.shutdown() }
        let (manager, _) = try managerWithASideCookie(through: server)
        manager.setTaskWillPerformHTTPRedirectionBlock { _, _, proposed in proposed.url.map { URLRequest(url: $0) } }
        var request = URLRequest(url: try url("http://a.example.com/go"))
        request.setValue("a.example.com", forHTTPHeaderField: "Host")
        let response = await manager.response(for: request)
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(server.requests.last?.headerValues("Host"), ["b.example.com"])
        XCTAssertEqual(server.requests.last?.headerValues("Cookie"), [])
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// A hop proposed on the same origin that the hook moves to another: what the hook passed
    /// on as it got it (the first origin's `Authorization`, `Cookie`, `Host`) does not go to
    /// the new origin, whose request named the first host and got that host's jar cookies; a
    /// credential the hook set itself goes.
    func testAHookThatMovesAHopToAnotherOriginDoesNotCarryTheFirstOnesCredentials() async throws {
        let server = try TestServer { request in
            switch URL(string: request.uri)?.path {
            case "/go": return TestResponse(status: 302, headers: [("Location", "/next")])
            default: return .text("ok")
            }
        }
        defer { server.shutdown() }
        for setsItsOwn in [false, true] {
            let (manager, jar) = try managerWithASideCookie(through: server)
            manager.setTaskWillPerformHTTPRedirectionBlock { _, _, proposed in
                var moved = proposed
                // Only the host changes: the relative Location kept the first URL's user:password.
                var components = proposed.url.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: false) }
                components?.host = "b.example.com"
                moved.url = components?.url
                if setsItsOwn { moved.setValue("Bearer for-b", forHTTPHeaderField: "Authorization") }
                return moved
            }
            var request = URLRequest(url: try url("http://ann:url-secret@a.example.com/go"))
            request.setValue("a.example.com", forHTTPHeaderField: "Host")
            request.setValue("Bearer for-a", forHTTPHeaderField: "Authorization")
            request.setValue("secret", forHTTPHeaderField: "Proxy-Authorization")
            let response = await manager.response(for: request)
            XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
            let last = try XCTUnwrap(server.requests.last)
            XCTAssertEqual(last.headerValues("Host"), ["b.example.com"])
            XCTAssertEqual(last.headerValues("Authorization"), setsItsOwn ? ["Bearer for-b"] : [])
            XCTAssertEqual(last.headerValues("Proxy-Authorization"), [])
            XCTAssertEqual(last.headerValues("Cookie"), [], "a.example.com's jar cookie went to b")
            XCTAssertEqual(jar.cookies.map(\.domain), ["a.example.com"])
            await manager.waitUntilInvalidatedAfterUse()
        }
    }

    // MARK: - One jar per manager

    func testManagersGivenOneJarShareCookies() async throws {
        var configuration = SessionConfiguration.default
        configuration.cookieJar = CookieJar()
        let first = URLSessionManager.raw(configuration)
        let second = URLSessionManager.raw(configuration)
        XCTAssertTrue(first.cookieJar === second.cookieJar)
        _ = await first.get(try Peer.url("/cookies/set?shared=yes"))
        let seen = await second.get(try Peer.url("/cookies"))
        XCTAssertEqual(try httpbinCookies(seen), ["shared": "yes"])
        await first.waitUntilInvalidatedAfterUse()
        await second.waitUntilInvalidatedAfterUse()
    }

    func testDefaultManagersHaveJarsOfTheirOwn() async throws {
        let first = URLSessionManager.raw()
        let second = URLSessionManager.raw()
        XCTAssertNotNil(first.cookieJar)
        XCTAssertFalse(first.cookieJar === second.cookieJar)
        XCTAssertTrue(first.configuration.cookieJar === first.cookieJar)
        let own = await first.get(try Peer.url("/cookies/set?mine=1"))
        XCTAssertEqual(try httpbinCookies(own), ["mine": "1"])
        let other = await second.get(try Peer.url("/cookies"))
        XCTAssertEqual(try httpbinCookies(other), [:])
        await first.waitUntilInvalidatedAfterUse()
        await second.waitUntilInvalidatedAfterUse()
    }

    // MARK: - Switches

    func testHTTPShouldSetCookiesOffSendsAndStoresNone() async throws {
        var configuration = SessionConfiguration.default
        configuration.httpShouldSetCookies = false
        let given = CookieJar()
        try given.add(Cookie(name: "pre", value: "1", domain: "127.0.0.1"))
        configuration.cookieJar = given
        let manager = URLSessionManager.raw(configuration)
        XCTAssertNil(manager.cookieJar)
        let response = await manager.get(try Peer.url("/cookies/set?a=1"))
        XCTAssertEqual(try httpbinCookies(response), [:])
        XCTAssertEqual(given.cookies.map(\.name), ["pre"])
        await manager.waitUntilInvalidatedAfterUse()
    }

    func testRequestThatDoesNotHandleCookiesSendsAndStoresNone() async throws {
        let manager = URLSessionManager.raw()
        let jar = try XCTUnwrap(manager.cookieJar)
        try jar.add(Cookie(name: "pre", value: "1", domain: "127.0.0.1"))
        var request = URLRequest(url: try Peer.url("/cookies/set?a=1"))
        request.httpShouldHandleCookies = false
        let response = await manager.response(for: request)
        XCTAssertEqual(try httpbinCookies(response), [:], "neither the stored nor the redirect's cookie is sent")
        XCTAssertEqual(jar.cookies.map(\.name), ["pre"])
        // Positive control on the same (pooled) easy handle: the engine is on again.
        let control = await manager.get(try Peer.url("/cookies"))
        XCTAssertEqual(try httpbinCookies(control), ["pre": "1"])
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// A pooled handle keeps its share and cookie engine between transfers: switching the
    /// engine off for one request and on for the next, on the same handle, must hold.
    func testTheCookieEngineGoesOffAndOnAgainOnAPooledHandle() async throws {
        let manager = URLSessionManager.raw()
        let jar = try XCTUnwrap(manager.cookieJar)
        try jar.add(Cookie(name: "pre", value: "1", domain: "127.0.0.1"))
        // A transfer that opens a connection resets its handle afterwards: the ones below
        // reuse this connection, so their handle keeps its share and engine between them.
        _ = await manager.get(try Peer.url("/get"))
        let on = await manager.get(try Peer.url("/cookies"))
        XCTAssertEqual(try httpbinCookies(on), ["pre": "1"])
        var request = URLRequest(url: try Peer.url("/cookies"))
        request.httpShouldHandleCookies = false
        let off = await manager.response(for: request)
        XCTAssertEqual(try httpbinCookies(off), [:], "the engine is off for this request")
        let again = await manager.get(try Peer.url("/cookies"))
        XCTAssertEqual(try httpbinCookies(again), ["pre": "1"], "and on again for the next")
        await manager.waitUntilInvalidatedAfterUse()
    }

    func testCallersCookieHeaderIsSentAloneAndResponseCookiesAreStored() async throws {
        let server = try server { _, path in path == "/set" ? ["srv=1"] : [] }
        defer { server.shutdown() }
        let manager = URLSessionManager.raw()
        let jar = try XCTUnwrap(manager.cookieJar)
        try jar.add(Cookie(name: "jar", value: "1", domain: "127.0.0.1"))
        _ = await manager.get(try server.url("/set"), headers: ["Cookie": "mine=1"])
        XCTAssertEqual(lastCookieHeaders(server), ["mine=1"])
        XCTAssertEqual(Set(jar.cookies.map(\.name)), ["jar", "srv"])
        _ = await manager.get(try server.url("/next"))
        let sent = lastCookieHeaders(server)?.first?.components(separatedBy: "; ")
        XCTAssertEqual(Set(sent ?? []), ["jar=1", "srv=1"])
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// With the caller's own `Cookie` header the response's cookies are stored by Curlew, one
    /// store into the jar each on the driver thread: as libcurl's engine, at most the first 50
    /// of a response (all of 5,000 were stored).
    func testAResponsesCookiesStoredBesideTheCallersHeaderAreBounded() async throws {
        let server = try server { _, path in path == "/many" ? (0..<5_000).map { "c\($0)=1" } : [] }
        defer { server.shutdown() }
        for callersHeader in [true, false] {
            let manager = URLSessionManager.raw()
            let jar = try XCTUnwrap(manager.cookieJar)
            let response = await manager.get(try server.url("/many"), headers: callersHeader ? ["Cookie": "mine=1"] : [:])
            XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
            XCTAssertEqual(Set(jar.cookies.map(\.name)), Set((0..<50).map { "c\($0)" }), "caller's header: \(callersHeader)")
            await manager.waitUntilInvalidatedAfterUse()
        }
    }

    func testInvalidatingWithResetSessionEmptiesTheJar() async throws {
        let manager = URLSessionManager.raw()
        let jar = try XCTUnwrap(manager.cookieJar)
        _ = await manager.get(try Peer.url("/cookies/set?a=1"))
        XCTAssertEqual(jar.cookies.map(\.name), ["a"])
        let invalidated = expectation(forNotification: .sessionDidInvalidate, object: manager)
        manager.invalidateSessionCancelingTasks(false, resetSession: true)
        await fulfillment(of: [invalidated], timeout: 30)
        XCTAssertEqual(jar.cookies, [])
    }

    // MARK: - TLS sessions in the jar's share

    /// A pooled handle stays joined to the jar's share between transfers. A policy change
    /// replaces the share while that handle is idle: the old share lives on until the handle
    /// moves to the new one at its next transfer, and the cookies come along.
    func testReplacingTheShareUnderAnIdlePooledHandleKeepsItsCookies() async throws {
        let manager = URLSessionManager.raw()
        _ = await manager.get(try Peer.url("/cookies/set?a=1"))
        // Two transfers at once leave two handles in the pool; the next request takes one.
        let url = try Peer.url("/get")
        async let first = manager.get(url)
        async let second = manager.get(url)
        _ = await (first, second)
        manager.securityPolicy = try TLSFixture.trustingTestRoot()
        let response = await manager.get(try Peer.url("/cookies"))
        XCTAssertEqual(try httpbinCookies(response), ["a": "1"])
        let statistics = manager.engine.security.statistics.withLock { $0 }
        XCTAssertEqual(statistics.sessionCacheReplacements, 1, "\(statistics)")
        XCTAssertEqual(manager.engine.cookieShare?.retiredCount, 0, "the pooled handles let go of the replaced share")
        // And again on the new share, from the handle that moved.
        let again = await manager.get(try Peer.url("/cookies"))
        XCTAssertEqual(try httpbinCookies(again), ["a": "1"])
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// A policy change replaces the TLS session cache of the jar's share (no stale session is
    /// offered to the new policy) and carries the cookies over.
    func testPolicyChangeReplacesSessionCacheAndKeepsCookies() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf, keepAlive: false) { request in
            var response = TestResponse.json("{\"ok\":true}")
            if request.path == "/set" { response.headers.append(("Set-Cookie", "tls=1; Secure; HttpOnly")) }
            return response
        }
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let first = await manager.get(try server.url("/set"))
        XCTAssertTrue(TLSFixture.isSuccess(first), "\(first.result)")
        XCTAssertTrue(server.waitForAllConnectionsClosed())

        var pinned = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [try TLSFixture.certificate(certificates.leaf)])
        pinned.trustedRootCertificates = [try TLSFixture.certificate(certificates.root)]
        manager.securityPolicy = pinned
        let second = await manager.get(try server.url("/check"))
        XCTAssertTrue(TLSFixture.isSuccess(second), "\(second.result)")
        XCTAssertEqual(lastCookieHeaders(server), ["tls=1"], "cookies survive the replacement")
        let statistics = manager.engine.security.statistics.withLock { $0 }
        XCTAssertEqual(statistics.sessionCacheReplacements, 1, "\(statistics)")
        XCTAssertEqual(statistics.refusedStaleConnections, 0, "no stale session was offered: \(statistics)")
        XCTAssertEqual(statistics.admittedResumedSessions, 0, "\(statistics)")
        await manager.waitUntilInvalidatedAfterUse()
    }
}
