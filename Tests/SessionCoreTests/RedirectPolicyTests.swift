import Foundation
import Serialization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

final class RedirectPolicyTests: XCTestCase {
    private func response(_ status: Int, location: String, from url: String) -> HTTPResponseHead {
        HTTPResponseHead(url: URL(string: url)!, statusCode: status, fields: [("Location", location)])
    }

    private func request(_ url: String, method: String = "GET", body: Data? = nil) -> URLRequest {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpBody = body
        request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
        request.setValue("a=1", forHTTPHeaderField: "Cookie")
        request.setValue("Basic x", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("kept", forHTTPHeaderField: "X-Custom")
        return request
    }

    func testCredentialsNeverCrossToAnotherOrigin() throws {
        for target in ["http://other.test/x", "https://a.test/x", "http://a.test:8080/x"] {
            let next = try XCTUnwrap(RedirectPolicy.redirectedRequest(
                from: request("http://a.test/start"), response: response(302, location: target, from: "http://a.test/start")))
            XCTAssertNil(next.value(forHTTPHeaderField: "Authorization"), target)
            XCTAssertNil(next.value(forHTTPHeaderField: "Cookie"), target)
            XCTAssertNil(next.value(forHTTPHeaderField: "Proxy-Authorization"), target)
            XCTAssertEqual(next.value(forHTTPHeaderField: "X-Custom"), "kept", target)
        }
    }

    /// A caller's `Host` names the first origin: it stays on that origin, and at another the
    /// field names the hop's own authority.
    func testACallersHostFieldStaysWithItsOrigin() throws {
        var first = request("http://a.test/start")
        first.setValue("a.test", forHTTPHeaderField: "host")
        for (target, host) in [
            ("http://other.test/x", "other.test"), ("https://a.test/x", "a.test"), ("http://a.test:8080/x", "a.test:8080"),
            ("https://[::1]:8443/x", "[::1]:8443"), ("https://b.test:443/x", "b.test"),
        ] {
            let next = try XCTUnwrap(RedirectPolicy.redirectedRequest(
                from: first, response: response(302, location: target, from: "http://a.test/start")))
            XCTAssertEqual(next.allHTTPHeaderFields?.filter { $0.key.lowercased() == "host" }.map(\.value), [host], target)
        }
        let plain = try XCTUnwrap(RedirectPolicy.redirectedRequest(
            from: request("http://a.test/start"), response: response(302, location: "http://b.test/", from: "http://a.test/start")))
        XCTAssertNil(plain.value(forHTTPHeaderField: "Host"), "no field where the caller named none")
        let same = try XCTUnwrap(RedirectPolicy.redirectedRequest(
            from: first, response: response(302, location: "/next", from: "http://a.test/start")))
        XCTAssertEqual(same.value(forHTTPHeaderField: "Host"), "a.test")
    }

    func testCredentialsStayOnTheSameOrigin() throws {
        let next = try XCTUnwrap(RedirectPolicy.redirectedRequest(
            from: request("http://a.test/start"), response: response(301, location: "/next", from: "http://a.test/start")))
        XCTAssertEqual(next.url?.absoluteString, "http://a.test/next")
        XCTAssertEqual(next.value(forHTTPHeaderField: "Authorization"), "Bearer secret")
        XCTAssertTrue(RedirectPolicy.isSameOrigin(URL(string: "http://a.test/")!, URL(string: "http://A.TEST:80/x")!))
    }

    /// Dot segments go from every redirect target, an absolute one too (RFC 3986 §5.2.2):
    /// paths go out as given, so `Location: http://a.test/a/../b` went as `/a/../b`.
    func testDotSegmentsLeaveEveryRedirectTarget() throws {
        for (location, expected) in [
            ("http://a.test/a/../b/./c", "http://a.test/b/c"), ("../x?q=/../y", "http://a.test/p/x?q=/../y"),
            ("/plain/path", "http://a.test/plain/path"),
        ] {
            let next = try XCTUnwrap(RedirectPolicy.redirectedRequest(
                from: request("http://a.test/p/q/r"), response: response(302, location: location, from: "http://a.test/p/q/r")))
            XCTAssertEqual(next.url?.absoluteString, expected, location)
        }
    }

    func testMethodRules() throws {
        let body = Data("x".utf8)
        func next(_ status: Int, _ method: String) throws -> URLRequest {
            try XCTUnwrap(RedirectPolicy.redirectedRequest(
                from: request("http://a.test/s", method: method, body: body),
                response: response(status, location: "/t", from: "http://a.test/s")))
        }
        XCTAssertEqual(try next(303, "POST").httpMethod, "GET")
        XCTAssertNil(try next(303, "POST").httpBody)
        XCTAssertEqual(try next(303, "HEAD").httpMethod, "HEAD")
        XCTAssertEqual(try next(302, "POST").httpMethod, "GET")
        XCTAssertEqual(try next(301, "PUT").httpMethod, "PUT")
        XCTAssertEqual(try next(307, "POST").httpMethod, "POST")
        XCTAssertEqual(try next(307, "POST").httpBody, body)
        XCTAssertEqual(try next(308, "PATCH").httpMethod, "PATCH")
    }

    func testUnfollowableLocationsAreRefused() {
        for location in ["ftp://a.test/x", "file:///etc/passwd", "javascript:alert(1)"] {
            XCTAssertNil(RedirectPolicy.redirectedRequest(
                from: request("http://a.test/s"), response: response(302, location: location, from: "http://a.test/s")), location)
        }
    }
}
