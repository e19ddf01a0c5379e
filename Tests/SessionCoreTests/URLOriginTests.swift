import XCTest
@testable import SessionCore

/// `URLOrigin`: the scheme and origin of a URL string, scanned as bytes on every request.
final class URLOriginTests: XCTestCase {
    func testSchemeIsLoweredAndTheOriginEndsBeforeThePath() {
        let origin = URLOrigin("HTTPS://Example.com:8443/a/b?c#d")
        XCTAssertEqual(origin.scheme, "https")
        XCTAssertTrue(origin.isHTTPS)
        XCTAssertEqual(origin.origin, "HTTPS://Example.com:8443")
        XCTAssertTrue(origin.hasHost)
        XCTAssertEqual(URLOrigin("http://h?q=/x").origin, "http://h")
        XCTAssertEqual(URLOrigin("http://h#/x").origin, "http://h")
        XCTAssertEqual(URLOrigin("http://h").origin, "http://h")
    }

    func testUserinfoAndIPv6Literals() {
        let withUser = URLOrigin("http://user:p%40ss@host:80/")
        XCTAssertEqual(withUser.origin, "http://user:p%40ss@host:80")
        XCTAssertTrue(withUser.hasHost)
        XCTAssertTrue(URLOrigin("http://[::1]:8080/x").hasHost)
        XCTAssertEqual(URLOrigin("http://[::1]:8080/x").origin, "http://[::1]:8080")
    }

    func testAPercentEncodedHostIsFlagged() {
        XCTAssertTrue(URLOrigin("http://%41bc/").hostIsPercentEncoded)
        XCTAssertTrue(URLOrigin("http://user@%FF:80/").hostIsPercentEncoded)
        XCTAssertFalse(URLOrigin("http://us%40er@host/").hostIsPercentEncoded, "userinfo is not the host")
        XCTAssertFalse(URLOrigin("http://host/%41").hostIsPercentEncoded, "the path is not the host")
    }

    func testStringsWithoutAHost() {
        XCTAssertFalse(URLOrigin("http:///path").hasHost)
        XCTAssertFalse(URLOrigin("http://:80/").hasHost)
        XCTAssertFalse(URLOrigin("http://user@/").hasHost)
        XCTAssertFalse(URLOrigin("http://[]/").hasHost)
        XCTAssertFalse(URLOrigin("mailto:someone").hasHost)
        XCTAssertEqual(URLOrigin("mailto:someone").scheme, "mailto")
        XCTAssertEqual(URLOrigin("").scheme, "")
        XCTAssertEqual(URLOrigin("://x").scheme, "")
        XCTAssertEqual(URLOrigin("1http://x").scheme, "")
        XCTAssertEqual(URLOrigin("no scheme here").scheme, "")
    }
}
