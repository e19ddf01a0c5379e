import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// `ParsedURLCache`: a manager's recently prepared URLs, parsed once.
final class ParsedURLCacheTests: XCTestCase {
    private func prepare(_ string: String, _ urls: ParsedURLCache) throws -> PreparedRequest {
        let url = try XCTUnwrap(URL(string: string))
        return try PreparedRequest.prepare(URLRequest(url: url), configuration: .default, urls: urls)
    }

    func testARepeatedURLReusesItsParse() throws {
        let urls = ParsedURLCache()
        let first = try prepare("http://127.0.0.1:8080/a?x=1", urls)
        let second = try prepare("http://127.0.0.1:8080/a?x=1", urls)
        let other = try prepare("http://127.0.0.1:8080/a?x=2", urls)
        XCTAssertTrue(first.curlURL === second.curlURL, "the second request parsed again")
        XCTAssertFalse(first.curlURL === other.curlURL)
        XCTAssertEqual(second.urlOrigin, URLOrigin("http://127.0.0.1:8080/a?x=1"))
        XCTAssertEqual(second.urlString, "http://127.0.0.1:8080/a?x=1")
    }

    func testTheOldestEntryMakesRoomAndEachIsKeptOnce() throws {
        let urls = ParsedURLCache()
        let first = try prepare("http://example.test/0", urls)
        for index in 1..<ParsedURLCache.capacity {
            _ = try prepare("http://example.test/\(index)", urls)
            _ = try prepare("http://example.test/\(index)", urls)  // a hit, not a second entry
        }
        XCTAssertTrue(urls.entry(for: "http://example.test/0")?.curlURL === first.curlURL, "evicted too early")
        _ = try prepare("http://example.test/new", urls)
        XCTAssertNil(urls.entry(for: "http://example.test/0"), "the oldest entry stayed")
        XCTAssertNotNil(urls.entry(for: "http://example.test/1"))
        XCTAssertNotNil(urls.entry(for: "http://example.test/new"))
    }

    func testCredentialsLongURLsAndRejectedURLsAreNeverKept() throws {
        let urls = ParsedURLCache()
        _ = try prepare("http://user:secret@example.test/", urls)
        XCTAssertNil(urls.entry(for: "http://user:secret@example.test/"))
        let long = "http://example.test/" + String(repeating: "a", count: ParsedURLCache.longestKept)
        _ = try prepare(long, urls)
        XCTAssertNil(urls.entry(for: long))
        XCTAssertThrowsError(try prepare("ftp://example.test/file", urls))
        XCTAssertNil(urls.entry(for: "ftp://example.test/file"))
        // Bytes beyond ASCII are never kept, and lookups compare bytes: the Kelvin sign
        // (U+212A) is canonically equal to "K" for `String ==`, not for a URL.
        let kelvin = ParsedURLCache.Entry(
            string: "http://example.test/\u{212A}", origin: URLOrigin("http://example.test/\u{212A}"),
            curlURL: try CurlURL(parsing: "http://example.test/K"))
        urls.keep(kelvin)
        XCTAssertNil(urls.entry(for: "http://example.test/\u{212A}"))
        _ = try prepare("http://example.test/K", urls)
        XCTAssertNotNil(urls.entry(for: "http://example.test/K"))
        XCTAssertNil(urls.entry(for: "http://example.test/\u{212A}"), "a canonically equal string shared the parse")
        // Rejected again, not served from anywhere.
        XCTAssertThrowsError(try prepare("ftp://example.test/file", urls))
    }
}
