import Foundation
import XCTest
@testable import CurlewCLI

/// HTTPie's grammar: `[METHOD] URL [ITEM ...]`, the items, and the URL shorthands.
final class RequestLineTests: XCTestCase {
    func testEveryItemKind() {
        XCTAssertEqual(RequestItem.parse("X-API-Key:abc"), .header(name: "X-API-Key", value: "abc"))
        XCTAssertEqual(RequestItem.parse("X-Empty:"), .header(name: "X-Empty", value: ""))
        XCTAssertEqual(RequestItem.parse("q==swift lang"), .query(name: "q", value: "swift lang"))
        XCTAssertEqual(RequestItem.parse("name=Curlew"), .field(name: "name", value: "Curlew"))
        XCTAssertEqual(RequestItem.parse("bio=@bio.txt"), .fieldFromFile(name: "bio", path: "bio.txt"))
        XCTAssertEqual(RequestItem.parse("stars:=5"), .jsonField(name: "stars", json: "5"))
        XCTAssertEqual(RequestItem.parse("meta:=@meta.json"), .jsonFieldFromFile(name: "meta", path: "meta.json"))
        XCTAssertEqual(RequestItem.parse("avatar@photo.png"), .fileField(name: "avatar", path: "photo.png"))
        XCTAssertEqual(RequestItem.parse("@body.json"), .body(path: "body.json"))
    }

    func testTheFirstSeparatorWinsAndTheLongestAtThatPlace() {
        XCTAssertEqual(RequestItem.parse("From:me@example.com"), .header(name: "From", value: "me@example.com"))
        XCTAssertEqual(RequestItem.parse("email=a@b.c"), .field(name: "email", value: "a@b.c"))
        XCTAssertEqual(RequestItem.parse("url=http://x:1/"), .field(name: "url", value: "http://x:1/"))
        XCTAssertEqual(RequestItem.parse("Authorization:Bearer a=b"), .header(name: "Authorization", value: "Bearer a=b"))
        XCTAssertEqual(RequestItem.parse("a==b==c"), .query(name: "a", value: "b==c"))
        XCTAssertEqual(RequestItem.parse("list:=[1, 2]"), .jsonField(name: "list", json: "[1, 2]"))
    }

    func testBackslashMakesASeparatorLiteral() {
        XCTAssertEqual(RequestItem.parse("a\\:b=c"), .field(name: "a:b", value: "c"))
        XCTAssertEqual(RequestItem.parse("x\\=y==1"), .query(name: "x=y", value: "1"))
        XCTAssertEqual(RequestItem.parse("path\\\\=v"), .field(name: "path\\", value: "v"))
    }

    func testTextsThatAreNoItems() {
        XCTAssertNil(RequestItem.parse("example.com"))
        XCTAssertNil(RequestItem.parse(":3000"), "a header needs a name")
        XCTAssertNil(RequestItem.parse("=value"))
        XCTAssertNil(RequestItem.parse("@"))
    }

    func testMethodIsOptionalAndInferred() throws {
        let get = try RequestLine.parse(["example.com/get"])
        XCTAssertNil(get.method)
        XCTAssertEqual(get.effectiveMethod, "GET")
        XCTAssertEqual(get.url.absoluteString, "http://example.com/get")

        let post = try RequestLine.parse(["example.com/post", "a=1"])
        XCTAssertEqual(post.effectiveMethod, "POST", "data items make it a POST")
        XCTAssertEqual(try RequestLine.parse(["example.com", "q==1", "H:v"]).effectiveMethod, "GET")

        let put = try RequestLine.parse(["put", "example.com", "a=1"])
        XCTAssertEqual(put.method, "PUT")
        XCTAssertEqual(put.items, [.field(name: "a", value: "1")])

        XCTAssertEqual(try RequestLine.parse(["PURGE", "example.com"]).method, "PURGE")
        XCTAssertEqual(try RequestLine.parse(["POST", "localhost:3000"]).url.absoluteString, "http://localhost:3000")
        let host = try RequestLine.parse(["localhost", "a=b"])
        XCTAssertNil(host.method, "a word followed by an item is the URL")
        XCTAssertEqual(host.url.absoluteString, "http://localhost")
    }

    /// A method curlew does not know, before a URL that also reads as a header item
    /// (`https://…` as `https: //…`, `host:8080/x` as `host: 8080/x`): the word was taken for
    /// the URL (`http://PURGE`, over plain http, with the caller's headers).
    func testAnUnknownMethodBeforeAURLThatReadsAsAHeader() throws {
        let purge = try RequestLine.parse(["PURGE", "https://cdn.example.com/x", "Authorization:Bearer T"])
        XCTAssertEqual(purge.method, "PURGE")
        XCTAssertEqual(purge.url.absoluteString, "https://cdn.example.com/x")
        XCTAssertEqual(purge.items, [.header(name: "Authorization", value: "Bearer T")])
        let mkcol = try RequestLine.parse(["MKCOL", "localhost:8080/dav/"])
        XCTAssertEqual(mkcol.method, "MKCOL")
        XCTAssertEqual(mkcol.url.absoluteString, "http://localhost:8080/dav/")
        XCTAssertEqual(try RequestLine.parse(["LOCK", "files.example.com:8443"]).method, "LOCK")
        XCTAssertEqual(try RequestLine.parse(["REPORT", "[::1]:8080/cal"]).url.absoluteString, "http://[::1]:8080/cal")
        // A word before a header item stays the URL.
        let host = try RequestLine.parse(["myhost", "X-Count:5"])
        XCTAssertNil(host.method)
        XCTAssertEqual(host.url.absoluteString, "http://myhost")
        XCTAssertEqual(host.items, [.header(name: "X-Count", value: "5")])
    }

    /// Only a scheme at the start is one: a URL without a scheme whose query holds a URL was
    /// refused ("is not an http or https URL").
    func testASchemeLaterInTheURLIsNotItsScheme() throws {
        XCTAssertEqual(
            try RequestLine.expandURL("example.com/login?next=http://example.com/").absoluteString,
            "http://example.com/login?next=http://example.com/")
        XCTAssertEqual(try RequestLine.expandURL("localhost:3000/cb?u=https://a").absoluteString, "http://localhost:3000/cb?u=https://a")
        XCTAssertEqual(try RequestLine.expandURL("HTTPS://example.com").scheme?.lowercased(), "https")
        XCTAssertThrowsError(try RequestLine.expandURL("ftp://example.com"))
    }

    func testURLShorthands() throws {
        XCTAssertEqual(try RequestLine.expandURL(":3000/x").absoluteString, "http://localhost:3000/x")
        XCTAssertEqual(try RequestLine.expandURL(":/x").absoluteString, "http://localhost/x")
        XCTAssertEqual(try RequestLine.expandURL(":").absoluteString, "http://localhost")
        XCTAssertEqual(try RequestLine.expandURL("://example.com").absoluteString, "http://example.com")
        XCTAssertEqual(try RequestLine.expandURL("https://example.com/a?b=c").absoluteString, "https://example.com/a?b=c")
        XCTAssertThrowsError(try RequestLine.expandURL("ftp://example.com"))
        XCTAssertThrowsError(try RequestLine.expandURL("http://"))
    }

    func testErrors() {
        XCTAssertThrowsError(try RequestLine.parse([])) { XCTAssertEqual($0 as? RequestLineError, .missingURL) }
        XCTAssertThrowsError(try RequestLine.parse(["example.com", "nonsense"])) {
            XCTAssertEqual($0 as? RequestLineError, .notAnItem("nonsense"))
        }
    }

    /// `get` is the first version's verb only in its own form; with anything else it is `GET`.
    func testALowercaseGetIsTheOldVerbOnlyInItsOwnForm() {
        for old in [["get", "u"], ["get", "u", "-H", "X: 1", "--timeout", "3", "--metrics"], ["get", "--header=X: 1", "u"], ["get", "--help"]] {
            XCTAssertEqual(CurlewCommand.routingLowercaseGet(old), old)
        }
        for new in [["get", "u", "a==1"], ["get", "u", "-p", "h"], ["get", "--check-status", "u"], ["get", "u", "X:1"]] {
            XCTAssertEqual(CurlewCommand.routingLowercaseGet(new), ["GET"] + new.dropFirst())
        }
        XCTAssertEqual(CurlewCommand.routingLowercaseGet(["-v", "get", "u"]), ["-v", "get", "u"], "the request command's method")
        // The old verb's header option becomes an item of the request command; --metrics,
        // which it has not, leaves the old verb to say what it cannot take.
        XCTAssertEqual(CurlewCommand.routingLowercaseGet(["get", "u", "-H", "X: 1", "--header=Y :2", "q==1", "--timeout", "3"]),
                       ["GET", "u", "X:1", "Y:2", "q==1", "--timeout", "3"])
        XCTAssertEqual(CurlewCommand.routingLowercaseGet(["get", "u", "--metrics", "q==1"]), ["get", "u", "--metrics", "q==1"])
    }

    /// An item where the URL goes means the URL was left out: `@backup.zip` was the host
    /// `backup.zip` (a real top-level domain), and `--auth`'s credential went there.
    func testAnItemWhereTheURLGoesIsRefused() throws {
        for arguments in [["PUT", "@backup.zip"], ["@notes.md"], ["POST", "photo@img.zip"], ["a=b"], ["q==1"], ["n:=1"]] {
            XCTAssertThrowsError(try RequestLine.parse(arguments), "\(arguments)") {
                XCTAssertEqual($0 as? RequestLineError, .itemWhereURLWas(arguments.last ?? ""))
            }
        }
        // A URL's path or query holds the separator: still the URL.
        XCTAssertEqual(try RequestLine.parse(["example.com/search?q=a"]).url.absoluteString, "http://example.com/search?q=a")
        XCTAssertEqual(try RequestLine.parse(["example.com?q=a", "b==c"]).url.absoluteString, "http://example.com?q=a")
        XCTAssertEqual(try RequestLine.parse(["https://@backup.zip/x"]).url.host, "backup.zip", "a scheme makes it a URL")
        XCTAssertEqual(try RequestLine.parse(["localhost:8080/x"]).url.absoluteString, "http://localhost:8080/x")
    }
}
