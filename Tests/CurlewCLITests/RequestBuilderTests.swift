import Foundation
import Serialization
import XCTest
@testable import CurlewCLI
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request each item combination builds, through Serialization's serializers.
final class RequestBuilderTests: XCTestCase {
    private func build(_ arguments: [String], mode: BodyMode = .json, directory: URL? = nil) throws -> BuiltRequest {
        var builder = RequestBuilder(line: try RequestLine.parse(arguments), mode: mode)
        if let directory { builder.directory = directory }
        return try builder.build()
    }

    /// A folder of the test's own for `@file` items, removed when the test ends.
    private func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        return folder
    }

    private func jsonBody(_ built: BuiltRequest) throws -> [String: Any] {
        let body = try XCTUnwrap(built.request.httpBody)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: body) as? [String: Any])
    }

    func testDataItemsMakeAJSONObject() throws {
        let built = try build(["example.com/post", "name=Curlew", "stars:=5", "ok:=true", "tags:=[\"a\"]", "tags=b", "X-Trace:1", "q==x y"])
        let request = built.request
        XCTAssertEqual(request.httpMethod, "POST")
        XCTAssertEqual(request.url?.absoluteString, "http://example.com/post?q=x%20y")
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Type"), "application/json")
        XCTAssertEqual(request.value(forHTTPHeaderField: "Accept"), RequestBuilder.jsonAccept)
        XCTAssertEqual(request.value(forHTTPHeaderField: "X-Trace"), "1")
        let object = try jsonBody(built)
        XCTAssertEqual(object["name"] as? String, "Curlew")
        XCTAssertEqual(object["stars"] as? Int, 5)
        XCTAssertEqual(object["ok"] as? Bool, true)
        XCTAssertEqual(object["tags"] as? [String], ["a", "b"], "a name given twice becomes an array")
    }

    /// A `:=` value goes as typed: parsed and encoded again, numbers passed through a Double
    /// (`12345678901234567890` went as `1.2345678901234567e+19`, `1.0` as `1`).
    func testRawJSONValuesAreSentAsTyped() throws {
        let built = try build([
            "example.com/post", "id:=12345678901234567890", "v:=1.0", "amt:=123456789012345678.25", "path=a/b",
            "tags:=[\"a\"]", "tags=b", "e:= [ ] ", "e=z", "x=1", "x:=2",
        ])
        XCTAssertEqual(
            String(decoding: try XCTUnwrap(built.request.httpBody), as: UTF8.self),
            #"{"amt":123456789012345678.25,"e":["z"],"id":12345678901234567890,"path":"a/b","tags":["a","b"],"v":1.0,"x":["1",2]}"#)
    }

    /// `--json` asks for JSON with a body from `@file` or `@-` too (it set `Accept` only for
    /// data items and no body); `--auth` wins over an `Authorization` a session kept (the
    /// session's was sent, `--auth` silently ignored), an item typed here over both.
    func testJSONAcceptForEveryBodyAndTheAuthOptionOverASessionsHeader() throws {
        let folder = try temporaryFolder()
        try Data("{}".utf8).write(to: folder.appendingPathComponent("b.json"))
        let fromFile = try build(["POST", "example.com/post", "@b.json"], mode: .forcedJSON, directory: folder)
        XCTAssertEqual(fromFile.request.value(forHTTPHeaderField: "Accept"), RequestBuilder.jsonAccept)
        var stdin = RequestBuilder(line: try RequestLine.parse(["POST", "example.com/post", "@-"]), mode: .forcedJSON)
        stdin.standardInput = { Data("{}".utf8) }
        XCTAssertEqual(try stdin.build().request.value(forHTTPHeaderField: "Accept"), RequestBuilder.jsonAccept)

        var session = RequestBuilder(line: try RequestLine.parse(["example.com/get"]), mode: .json)
        session.baseHeaders = ["Authorization": "Bearer OLD"]
        session.basicCredentials = (user: "ann", password: "pw")
        XCTAssertEqual(try session.build().request.value(forHTTPHeaderField: "Authorization"), "Basic YW5uOnB3")
        var typed = RequestBuilder(line: try RequestLine.parse(["example.com/get", "Authorization:Bearer NEW"]), mode: .json)
        typed.baseHeaders = ["Authorization": "Bearer OLD"]
        typed.basicCredentials = (user: "ann", password: "pw")
        XCTAssertEqual(try typed.build().request.value(forHTTPHeaderField: "Authorization"), "Bearer NEW")
    }

    /// A header typed twice sends both values (the last one alone went out), cookies joined
    /// as one `Cookie` line; the first typed replaces a session's value, and an empty one adds
    /// nothing.
    func testAHeaderTypedTwiceSendsBothValues() throws {
        var builder = RequestBuilder(
            line: try RequestLine.parse(["example.com/get", "X-Tag:a", "x-tag:b", "X-Tag:", "Cookie:a=1", "Cookie:b=2"]), mode: .json)
        builder.baseHeaders = ["X-Tag": "from-session"]
        let request = try builder.build().request
        XCTAssertEqual(request.value(forHTTPHeaderField: "X-Tag"), "a, b")
        XCTAssertEqual(request.value(forHTTPHeaderField: "Cookie"), "a=1; b=2")
        let once = try build(["example.com/get", "X-Empty:", "X-Empty:later"])
        XCTAssertEqual(once.request.value(forHTTPHeaderField: "X-Empty"), "later")
        // A field of one value given twice is a mistake (it went out as `Bearer a, Bearer b`).
        XCTAssertThrowsError(try build(["example.com/get", "Authorization:Bearer a", "authorization:Bearer b"])) {
            XCTAssertEqual(($0 as? BuildError)?.description, "header authorization takes one value: it was given twice")
        }
    }

    func testFormAndQueryKeepTheirOrderAndEscaping() throws {
        let built = try build(["example.com/post?x=1", "a=1 2", "b=&", "z==é"], mode: .form)
        XCTAssertEqual(built.request.url?.absoluteString, "http://example.com/post?x=1&z=%C3%A9")
        XCTAssertEqual(built.request.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("application/x-www-form-urlencoded"), true)
        XCTAssertEqual(String(decoding: try XCTUnwrap(built.request.httpBody), as: UTF8.self), "a=1%202&b=%26")
    }

    func testAFileFieldMakesMultipart() throws {
        let folder = try temporaryFolder()
        try Data("hello".utf8).write(to: folder.appendingPathComponent("note.txt"))
        let built = try build(["example.com/post", "title=x", "file@note.txt"], mode: .json, directory: folder)
        XCTAssertEqual(built.request.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("multipart/form-data; boundary="), true)
        XCTAssertNotNil(built.request.httpBodyStream)
        XCTAssertThrowsError(try build(["example.com/post", "file@missing.txt"], directory: folder))
        XCTAssertThrowsError(try build(["example.com/post", "file@note.txt"], mode: .forcedJSON, directory: folder))
    }

    func testWholeBodyFromAFile() throws {
        let folder = try temporaryFolder()
        try Data("{\"a\":1}".utf8).write(to: folder.appendingPathComponent("body.json"))
        let built = try build(["PUT", "example.com/put", "@body.json"], directory: folder)
        XCTAssertEqual(built.request.httpMethod, "PUT")
        XCTAssertEqual(built.bodyFile?.lastPathComponent, "body.json")
        XCTAssertEqual(built.request.value(forHTTPHeaderField: "Content-Type"), "application/json")
        XCTAssertThrowsError(try build(["example.com/put", "@body.json", "a=1"], directory: folder))
    }

    func testBodyFromStandardInput() throws {
        var builder = RequestBuilder(line: try RequestLine.parse(["example.com/post", "@-"]))
        builder.standardInput = { Data("{\"piped\":true}".utf8) }
        let built = try builder.build()
        XCTAssertEqual(built.request.httpMethod, "POST")
        XCTAssertEqual(built.request.httpBody, Data("{\"piped\":true}".utf8))
        XCTAssertEqual(built.request.value(forHTTPHeaderField: "Content-Type"), "application/json")
        XCTAssertNil(built.bodyFile)
    }

    func testEmptyHeaderAndForcedJSON() throws {
        let built = try build(["example.com", "X-Empty:"], mode: .forcedJSON)
        XCTAssertEqual(built.request.httpMethod, "GET")
        XCTAssertEqual(built.request.value(forHTTPHeaderField: "X-Empty"), "")
        XCTAssertEqual(built.request.value(forHTTPHeaderField: "Accept"), RequestBuilder.jsonAccept)
        XCTAssertNil(built.request.httpBody)
    }

    /// Foundation's `setValue(_:forHTTPHeaderField:)` drops a value with a line break without
    /// a word (the request went out without the header): the builder refuses it, and a name
    /// that is not a token, with a message.
    func testAHeaderThatCannotBeSentIsRefusedNotDropped() {
        XCTAssertThrowsError(try build(["example.com", "X-A:one\ntwo"])) {
            XCTAssertEqual("\($0)", "the value of header X-A holds a line break or another control character")
        }
        XCTAssertThrowsError(try build(["example.com", "X-A:one\r"]))
        XCTAssertThrowsError(try build(["example.com", "X A:b"])) {
            XCTAssertTrue("\($0)".hasPrefix("'X A' is not a header name"), "\($0)")
        }
        XCTAssertNoThrow(try build(["example.com", "X-A:tab\tand é"]), "HTAB and non-ASCII text are sent as they are")
    }

    func testBadJSONAndRawJSONInAFormAreRefused() {
        XCTAssertThrowsError(try build(["example.com", "a:={oops"]))
        XCTAssertThrowsError(try build(["example.com", "a:=1"], mode: .form))
    }
}
