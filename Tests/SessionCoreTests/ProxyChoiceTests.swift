import Foundation
@testable import SessionCore
import XCTest

/// `ProxyChoice` and `ConnectivityWait.Routes` alone: which proxy libcurl 7.88 takes for a
/// URL, and which routes a failed attempt waits for. (The waits themselves, in network
/// namespaces: `WaitsForConnectivityTests`.)
final class ProxyChoiceTests: XCTestCase {
    private func environment(_ values: [String: String]) -> (String) -> String? {
        { name in values[name].flatMap { $0.isEmpty ? nil : $0 } }
    }

    /// libcurl's `Curl_check_noproxy`, case by case (its unit test 1614's rules).
    func testTheBypassListMatchesAsLibcurlDoes() {
        let cases: [(host: String, list: String, matches: Bool)] = [
            ("example.com", "*", true),
            ("example.com", "example.com", true),
            ("www.example.com", "example.com", true),
            ("nonexample.com", "example.com", false),
            ("example.com", ".example.com", true),
            ("www.example.com", ".example.com", true),
            ("example.com.", "example.com", true),
            ("example.com", "example.com.", true),
            ("EXAMPLE.com", "example.COM", true),
            ("example.com", "www.example.com", false),
            ("example.com", "other.org, example.com", true),
            ("example.com", "other.org example.com", true),  // blanks separate too
            ("example.com", ",,  ,other.org,,example.com,", true),
            ("example.com", "*, other.org", false),  // `*` counts only as the whole list
            ("example.com", "", false),
            ("10.1.2.3", "10.1.2.3", true),
            ("10.1.2.3", "10.0.0.0/8", true),
            ("11.1.2.3", "10.0.0.0/8", false),
            ("10.1.2.3", "10.1.2.0/24", true),
            ("10.1.3.3", "10.1.2.0/24", false),
            ("10.1.2.3", "10.1.2.0/0", false),  // 0 bits: the whole address
            ("10.1.2.3", "10.1.2.3/0", true),
            ("10.1.2.3", "10.1.2.0/33", false),
            ("10.1.2.3", "10.1.2.0/-1", false),
            ("10.1.2.3", "10.1.2.0/abc", false),
            ("10.1.2.3", "10.1.2.3/abc", true),
            ("10.1.2.3", "10.1.2", false),
            ("10.1.2.3", "2.3", false),  // an address never matches as a name
            ("::1", "::1", true),  // IPv6 as text (libcurl 7.88)
            ("::1", "[::1]", false),
            ("::1", "::/0", false),
            ("", "*", false),
        ]
        for (host, list, matches) in cases {
            XCTAssertEqual(ProxyChoice.noProxyMatches(host: host, list: list), matches, "\(host) against '\(list)'")
        }
    }

    /// `detect_proxy`: the scheme's variable (no uppercase `HTTP_PROXY`), then `all_proxy`,
    /// `ALL_PROXY`; an empty value is no value.
    func testTheEnvironmentsProxyIsTheSchemesVariableThenAllProxy() {
        let everything = environment([
            "http_proxy": "http://h:1", "HTTP_PROXY": "http://H:1", "https_proxy": "http://s:1", "HTTPS_PROXY": "http://S:1",
            "all_proxy": "http://a:1", "ALL_PROXY": "http://A:1",
        ])
        XCTAssertEqual(ProxyChoice.environmentProxy(scheme: "http", environment: everything), "http://h:1")
        XCTAssertEqual(ProxyChoice.environmentProxy(scheme: "HTTPS", environment: everything), "http://s:1")
        let upper = environment(["HTTP_PROXY": "http://H:1", "HTTPS_PROXY": "http://S:1", "ALL_PROXY": "http://A:1"])
        XCTAssertEqual(ProxyChoice.environmentProxy(scheme: "http", environment: upper), "http://A:1")
        XCTAssertEqual(ProxyChoice.environmentProxy(scheme: "https", environment: upper), "http://S:1")
        let empty = environment(["http_proxy": "", "all_proxy": "http://a:1"])
        XCTAssertEqual(ProxyChoice.environmentProxy(scheme: "http", environment: empty), "http://a:1")
        XCTAssertNil(ProxyChoice.environmentProxy(scheme: "http", environment: environment([:])))
    }

    func testTheProxyARequestTakes() {
        let variables = environment(["http_proxy": "http://h:1", "https_proxy": "http://s:1", "no_proxy": "internal.test,10.0.0.0/8"])
        func choice(_ proxy: SessionConfiguration.Proxy, bypass: [String] = [], names: Bool = true) -> ProxyChoice {
            let list = ProxyBypassList(bypass)
            return ProxyChoice(
                proxy: proxy, environmentNamesProxy: names, noProxy: list.noProxy,
                bypassAddresses: list.hasAddressRanges ? list : nil)
        }
        // The environment, with its own bypass list.
        XCTAssertEqual(choice(.environment).proxy(scheme: "http", host: "example.com", environment: variables), "http://h:1")
        XCTAssertEqual(choice(.environment).proxy(scheme: "https", host: "example.com", environment: variables), "http://s:1")
        XCTAssertNil(choice(.environment).proxy(scheme: "http", host: "api.internal.test", environment: variables))
        XCTAssertNil(choice(.environment).proxy(scheme: "http", host: "10.9.8.7", environment: variables))
        // A configured bypass list replaces the environment's.
        XCTAssertEqual(
            choice(.environment, bypass: ["other.test"]).proxy(scheme: "http", host: "api.internal.test", environment: variables),
            "http://h:1")
        XCTAssertNil(choice(.environment, bypass: ["other.test"]).proxy(scheme: "http", host: "other.test", environment: variables))
        // An IPv6-only list (matched by Curlew, NOPROXY "") also replaces it.
        XCTAssertEqual(
            choice(.environment, bypass: ["fd00::/8"]).proxy(scheme: "http", host: "api.internal.test", environment: variables),
            "http://h:1")
        XCTAssertNil(choice(.environment, bypass: ["fd00::/8"]).proxy(scheme: "http", host: "fd00::5", environment: variables))
        // A manager made with no proxy variable uses none.
        XCTAssertNil(choice(.environment, names: false).proxy(scheme: "http", host: "example.com", environment: variables))
        // A proxy set outright: the environment's bypass list does not apply; the configured one does.
        XCTAssertEqual(choice(.url("p:3128")).proxy(scheme: "http", host: "api.internal.test", environment: variables), "p:3128")
        XCTAssertNil(choice(.url("p:3128"), bypass: ["*"]).proxy(scheme: "http", host: "example.com", environment: variables))
        XCTAssertNil(choice(.url("")).proxy(scheme: "http", host: "example.com", environment: variables))
        XCTAssertNil(choice(.none).proxy(scheme: "http", host: "example.com", environment: variables))
    }

    func testTheRoutesAFailedAttemptWaitsFor() throws {
        func routes(_ proxy: SessionConfiguration.Proxy, overrides: [HostOverride] = [], socket: Bool = false) -> ConnectivityWait.Routes {
            ConnectivityWait.Routes(
                proxies: ProxyChoice(proxy: proxy, environmentNamesProxy: true, noProxy: nil, bypassAddresses: nil),
                overrides: overrides, viaUnixSocket: socket)
        }
        let url = try XCTUnwrap(URL(string: "http://api.example.test/path"))
        let none = environment([:])
        // Direct: the origin's route (a name: the default route).
        XCTAssertEqual(routes(.none).targets(for: url, mayBecomeHTTPS: false, environment: none), [.defaultRoute])
        XCTAssertEqual(
            routes(.none).targets(for: URL(string: "http://[2001:db8::5]:8080/"), mayBecomeHTTPS: false, environment: none),
            [.ipv6("2001:db8::5")])
        XCTAssertEqual(routes(.none).targets(for: URL(string: "http://localhost:1/"), mayBecomeHTTPS: false, environment: none), [.ipv4("127.0.0.1")])
        XCTAssertEqual(routes(.none, socket: true).targets(for: url, mayBecomeHTTPS: false, environment: none), [])
        XCTAssertEqual(routes(.none).targets(for: URL(string: "file:///tmp/x"), mayBecomeHTTPS: false, environment: none), [])
        // Through a proxy: the proxy's, whatever the origin (localhost included: libcurl 7.88
        // sends it through the proxy too).
        XCTAssertEqual(routes(.url("http://10.1.2.3:3128")).targets(for: url, mayBecomeHTTPS: false, environment: none), [.ipv4("10.1.2.3")])
        XCTAssertEqual(
            routes(.url("socks5h://[fd00::1]:1080")).targets(for: URL(string: "http://localhost:1/"), mayBecomeHTTPS: false, environment: none),
            [.ipv6("fd00::1")])
        XCTAssertEqual(routes(.url("proxy.test:3128")).targets(for: url, mayBecomeHTTPS: false, environment: none), [.defaultRoute])
        // A name that resolved: the address libcurl tried counts beside the default route (a LAN
        // without one waited for it until the resource timeout, with the host's route there).
        XCTAssertEqual(ConnectivityWait.Routes.adding(tried: "198.18.0.1", to: [.defaultRoute]), [.defaultRoute, .ipv4("198.18.0.1")])
        // The IPv4 forms libcurl reads as an address are addresses, not names.
        for short in ["127.1", "0x7f.0.0.1", "2130706433"] {
            XCTAssertEqual(ConnectivityWait.Target(host: short), .ipv4("127.0.0.1"), short)
        }
        XCTAssertEqual(ConnectivityWait.Target(host: "cafe"), .defaultRoute, "a name of hex letters stays a name")
        XCTAssertEqual(ConnectivityWait.Target(host: "example.com"), .defaultRoute)
        XCTAssertEqual(ConnectivityWait.Routes.adding(tried: "fd00::1", to: [.defaultRoute]), [.defaultRoute, .ipv6("fd00::1")])
        XCTAssertEqual(ConnectivityWait.Routes.adding(tried: "", to: [.defaultRoute]), [.defaultRoute], "it did not resolve")
        XCTAssertEqual(ConnectivityWait.Routes.adding(tried: "10.1.2.3", to: [.ipv4("10.1.2.3")]), [.ipv4("10.1.2.3")])
        XCTAssertEqual(ConnectivityWait.Routes.adding(tried: "10.9.9.9", to: [.ipv4("10.1.2.3")]), [.ipv4("10.1.2.3")], "no name")
        XCTAssertEqual(routes(.url("localhost:3128")).targets(for: url, mayBecomeHTTPS: false, environment: none), [.ipv4("127.0.0.1")])
        // A proxy libcurl refuses without connecting (an unsupported scheme, or one curl's
        // legacy rule guesses from the host name): nothing to wait for.
        XCTAssertEqual(routes(.url("ftp.corp.test:3128")).targets(for: url, mayBecomeHTTPS: false, environment: none), [])
        XCTAssertEqual(routes(.url("gopher://10.1.2.3:70")).targets(for: url, mayBecomeHTTPS: false, environment: none), [])
        XCTAssertEqual(ProxyChoice.scheme(ofProxy: "user:pw@FTP.corp.test:21"), "ftp")
        XCTAssertEqual(ProxyChoice.scheme(ofProxy: "proxy.ftp.test:3128"), "http")
        XCTAssertEqual(ProxyChoice.scheme(ofProxy: "SOCKS5H://10.0.0.1"), "socks5h")
        // A unix socket: libcurl uses no proxy, and no route leads there.
        XCTAssertEqual(routes(.url("http://10.1.2.3:3128"), socket: true).targets(for: url, mayBecomeHTTPS: false, environment: none), [])
        // Overrides: the origin's (connect, then resolve) and the proxy's (resolve only; 1080
        // and 443 are libcurl's default proxy ports).
        let overrides = [
            try HostOverride.connect("api.example.test", port: 80, to: "edge.example.test", port: 8080),
            try HostOverride.resolve("edge.example.test", port: 8080, to: ["192.0.2.9"]),
            try HostOverride.resolve("edge.example.test", port: 8080, to: ["192.0.2.7", "2001:db8::7"]),
            try HostOverride.resolve("api.example.test", port: 443, to: ["192.0.2.44"]),
            try HostOverride.resolve("proxy.test", port: 1080, to: ["192.0.2.10"]),
            try HostOverride.resolve("tls-proxy.test", port: 443, to: ["192.0.2.11"]),
            try HostOverride.connect("proxy.test", port: 1080, to: "elsewhere.test", port: 1),
        ]
        XCTAssertEqual(
            routes(.none, overrides: overrides).targets(for: url, mayBecomeHTTPS: false, environment: none),
            [.ipv4("192.0.2.7"), .ipv6("2001:db8::7")])
        XCTAssertEqual(
            routes(.url("proxy.test"), overrides: overrides).targets(for: url, mayBecomeHTTPS: false, environment: none), [.ipv4("192.0.2.10")])
        XCTAssertEqual(
            routes(.url("https://tls-proxy.test"), overrides: overrides).targets(for: url, mayBecomeHTTPS: false, environment: none),
            [.ipv4("192.0.2.11")])
        // HSTS may send the http URL as https: that request's routes count too.
        XCTAssertEqual(
            routes(.none, overrides: overrides).targets(for: url, mayBecomeHTTPS: true, environment: none),
            [.ipv4("192.0.2.7"), .ipv6("2001:db8::7"), .ipv4("192.0.2.44")])
        let twoProxies = environment(["http_proxy": "http://10.0.0.1:3128", "https_proxy": "http://10.0.0.2:3128"])
        XCTAssertEqual(routes(.environment).targets(for: url, mayBecomeHTTPS: false, environment: twoProxies), [.ipv4("10.0.0.1")])
        XCTAssertEqual(
            routes(.environment).targets(for: url, mayBecomeHTTPS: true, environment: twoProxies), [.ipv4("10.0.0.1"), .ipv4("10.0.0.2")])
        let oneProxy = environment(["all_proxy": "http://10.0.0.1:3128"])
        XCTAssertEqual(routes(.environment).targets(for: url, mayBecomeHTTPS: true, environment: oneProxy), [.ipv4("10.0.0.1")])
    }
}
