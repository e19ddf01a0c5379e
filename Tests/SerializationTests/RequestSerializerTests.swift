import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import Serialization

final class RequestSerializerTests: XCTestCase {
    struct Boom: Error, Equatable { let code: Int }

    func testGETPutsParametersInTheQuery() throws {
        let serializer = HTTPRequestSerializer()
        let request = try serializer.request(method: "GET", urlString: "https://example.com/s?x=1#frag",
                                             parameters: ["q": "a b", "n": 2])
        XCTAssertEqual(request.url?.absoluteString, "https://example.com/s?x=1&n=2&q=a%20b#frag")
        XCTAssertNil(request.httpBody)
        XCTAssertEqual(request.httpMethod, "GET")
        for method in ["HEAD", "DELETE", "get"] {
            let other = try serializer.request(method: method, urlString: "https://example.com", parameters: ["a": 1])
            XCTAssertEqual(other.url?.query, "a=1", method)
        }
    }

    func testPOSTPutsParametersInTheBody() throws {
        let request = try HTTPRequestSerializer().request(
            method: "POST", urlString: "https://example.com/form", parameters: ["b": "2", "a": ["x": "1"]])
        XCTAssertEqual(request.url?.absoluteString, "https://example.com/form")
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Type"), "application/x-www-form-urlencoded")
        XCTAssertEqual(request.httpBody.map { String(decoding: $0, as: UTF8.self) }, "a%5Bx%5D=1&b=2")
    }

    /// AFHTTPRequestSerializer: a method that does not put parameters in the URL always gets a
    /// form body, an empty one for nil parameters (so the request says `Content-Length: 0`).
    func testNilParametersGiveBodyMethodsAnEmptyFormBody() throws {
        let serializer = HTTPRequestSerializer()
        let none: [String: Int]? = nil
        for method in ["POST", "PUT", "PATCH", "post"] {
            for parameters in [nil, none as (any Sendable)?] {
                let request = try serializer.request(method: method, urlString: "https://e.com", parameters: parameters)
                XCTAssertEqual(request.httpBody, Data(), method)
                XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Type"), "application/x-www-form-urlencoded",
                               method)
            }
        }
        // A caller's Content-Type is kept.
        var request = URLRequest(url: URL(fileURLWithPath: "/"))
        request.httpMethod = "POST"
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        let kept = try serializer.request(bySerializing: request, parameters: nil)
        XCTAssertEqual(kept.value(forHTTPHeaderField: "Content-Type"), "text/plain")
        XCTAssertEqual(kept.httpBody, Data())
        // Methods that encode parameters in the URI get neither.
        for method in ["GET", "HEAD", "DELETE"] {
            let request = try serializer.request(method: method, urlString: "https://e.com/x", parameters: nil)
            XCTAssertNil(request.httpBody, method)
            XCTAssertNil(request.value(forHTTPHeaderField: "Content-Type"), method)
            XCTAssertEqual(request.url?.absoluteString, "https://e.com/x", method)
        }
    }

    /// AFJSONRequestSerializer and AFPropertyListRequestSerializer: nil parameters mean no
    /// body and no Content-Type, whatever the method.
    func testJSONAndPropertyListSerializersSendNoBodyForNilParameters() throws {
        let serializers: [any HTTPRequestSerializing] = [JSONRequestSerializer(), PropertyListRequestSerializer()]
        for serializer in serializers {
            for method in ["POST", "PUT", "PATCH", "GET"] {
                let request = try serializer.request(method: method, urlString: "https://e.com", parameters: nil)
                XCTAssertNil(request.httpBody, "\(type(of: serializer)) \(method)")
                XCTAssertNil(request.value(forHTTPHeaderField: "Content-Type"), "\(type(of: serializer)) \(method)")
            }
        }
    }

    func testSettingsApplyToNewRequests() throws {
        var serializer = HTTPRequestSerializer()
        serializer.timeoutInterval = 12
        serializer.cachePolicy = .reloadIgnoringLocalCacheData
        serializer.httpShouldHandleCookies = false
        serializer.httpMethodsEncodingParametersInURI = ["GET"]
        let request = try serializer.request(method: "DELETE", urlString: "https://e.com/x", parameters: ["a": 1])
        XCTAssertEqual(request.timeoutInterval, 12)
        XCTAssertEqual(request.cachePolicy, .reloadIgnoringLocalCacheData)
        XCTAssertFalse(request.httpShouldHandleCookies)
        XCTAssertNil(request.url?.query)
        XCTAssertEqual(request.httpBody.map { String(decoding: $0, as: UTF8.self) }, "a=1")
    }

    func testDefaultHeaders() throws {
        let serializer = HTTPRequestSerializer()
        let userAgent = try XCTUnwrap(serializer.value(forHTTPHeaderField: "user-agent"))
        XCTAssertTrue(userAgent.hasPrefix("Curlew/\(CurlewVersion.string) (Linux; "), userAgent)
        XCTAssertTrue(userAgent.hasSuffix(")"))
        let language = try XCTUnwrap(serializer.value(forHTTPHeaderField: "Accept-Language"))
        XCTAssertTrue(language.contains(";q=1"), language)
        let request = try serializer.request(method: "GET", urlString: "https://e.com", parameters: nil)
        XCTAssertEqual(request.value(forHTTPHeaderField: "User-Agent"), userAgent)
        XCTAssertEqual(request.value(forHTTPHeaderField: "Accept-Language"), language)
    }

    func testRequestHeadersWinOverDefaults() throws {
        var serializer = HTTPRequestSerializer()
        serializer.setValue("default", forHTTPHeaderField: "X-Thing")
        var request = URLRequest(url: URL(fileURLWithPath: "/"))
        request.setValue("mine", forHTTPHeaderField: "X-Thing")
        let result = try serializer.request(bySerializing: request, parameters: nil)
        XCTAssertEqual(result.value(forHTTPHeaderField: "X-Thing"), "mine")
    }

    func testSetValueIsCaseInsensitiveAndNilRemoves() {
        var serializer = HTTPRequestSerializer()
        serializer.setValue("a", forHTTPHeaderField: "X-Test")
        serializer.setValue("b", forHTTPHeaderField: "x-test")
        XCTAssertEqual(serializer.value(forHTTPHeaderField: "X-TEST"), "b")
        XCTAssertEqual(serializer.httpRequestHeaders.keys.filter { $0.lowercased() == "x-test" }.count, 1)
        serializer.setValue(nil, forHTTPHeaderField: "X-TEST")
        XCTAssertNil(serializer.value(forHTTPHeaderField: "x-test"))
    }

    func testAuthorizationHeader() {
        var serializer = HTTPRequestSerializer()
        serializer.setAuthorizationHeaderField(username: "user", password: "päss")
        XCTAssertEqual(serializer.value(forHTTPHeaderField: "Authorization"),
                       "Basic " + Data("user:päss".utf8).base64EncodedString())
        serializer.clearAuthorizationHeader()
        XCTAssertNil(serializer.value(forHTTPHeaderField: "Authorization"))
    }

    func testCRLFInHeaderValuesIsRejectedByEverySerializer() {
        let bad = ["evil\r\nInjected: 1", "evil\nx", "evil\rx", "nul\0x", "bell\u{7}x", "esc\u{1B}x", "del\u{7F}x"]
        for value in bad {
            var http = HTTPRequestSerializer()
            http.setValue(value, forHTTPHeaderField: "X-Bad")
            var json = JSONRequestSerializer()
            json.setValue(value, forHTTPHeaderField: "X-Bad")
            var plist = PropertyListRequestSerializer()
            plist.setValue(value, forHTTPHeaderField: "X-Bad")
            let serializers: [any HTTPRequestSerializing] = [http, json, plist]
            for serializer in serializers {
                assertSerializationError(try serializer.request(method: "POST", urlString: "https://e.com",
                                                                parameters: ["a": 1])) { error in
                    guard case .invalidHeader(let field, _) = error else { return XCTFail("\(error)") }
                    XCTAssertEqual(field, "X-Bad")
                }
                assertSerializationError(try serializer.request(method: "GET", urlString: "https://e.com",
                                                                parameters: nil))
                assertSerializationError(try serializer.request(
                    bySerializing: URLRequest(url: URL(fileURLWithPath: "/")), parameters: nil))
                assertSerializationError(try serializer.multipartFormRequest(
                    method: "POST", urlString: "https://e.com", parameters: nil, constructingBodyWith: nil))
            }
        }
        // CR/LF set on the request itself, and a header name that is not a token.
        // (URLRequest.setValue silently drops such values on Linux; allHTTPHeaderFields keeps them.)
        var request = URLRequest(url: URL(fileURLWithPath: "/"))
        request.allHTTPHeaderFields = ["X-Own": "a\r\nb"]
        assertSerializationError(try HTTPRequestSerializer().request(bySerializing: request, parameters: nil))
        var badName = HTTPRequestSerializer()
        badName.setValue("v", forHTTPHeaderField: "Bad Name")
        assertSerializationError(try badName.request(method: "GET", urlString: "https://e.com", parameters: nil))
        // A tab is allowed.
        var tab = HTTPRequestSerializer()
        tab.setValue("a\tb", forHTTPHeaderField: "X-Tab")
        XCTAssertNoThrow(try tab.request(method: "GET", urlString: "https://e.com", parameters: nil))
    }

    func testInvalidURLAndMethod() {
        let serializer = HTTPRequestSerializer()
        for string in ["", "http://e.com/a b", "http://e.com/\r\nx", "http://e.com/\u{7F}"] {
            assertSerializationError(try serializer.request(method: "GET", urlString: string, parameters: nil)) {
                guard case .invalidURL = $0 else { return XCTFail("\($0)") }
            }
        }
        assertSerializationError(try serializer.request(method: "GE T", urlString: "https://e.com", parameters: nil)) {
            guard case .invalidMethod = $0 else { return XCTFail("\($0)") }
        }
    }

    func testCustomQueryStringClosureAndItsError() throws {
        var serializer = HTTPRequestSerializer()
        serializer.queryStringSerialization = .custom { request, parameters in
            XCTAssertEqual(request.httpMethod, "GET")
            return "custom=\((parameters as? [String: Int])?["a"] ?? -1)"
        }
        let request = try serializer.request(method: "GET", urlString: "https://e.com/p", parameters: ["a": 5])
        XCTAssertEqual(request.url?.query, "custom=5")

        serializer.queryStringSerialization = .custom { _, _ in throw Boom(code: 42) }
        XCTAssertThrowsError(try serializer.request(method: "POST", urlString: "https://e.com", parameters: ["a": 1])) {
            XCTAssertEqual($0 as? Boom, Boom(code: 42))
        }
    }

    func testEncodableParameters() throws {
        struct Search: Encodable, Sendable { let q: String; let page: Int; let filters: [String] }
        let value = Search(q: "x y", page: 2, filters: ["a", "b"])
        let get = try HTTPRequestSerializer().request(method: "GET", urlString: "https://e.com", parameters: value)
        XCTAssertEqual(get.url?.query, "filters%5B%5D=a&filters%5B%5D=b&page=2&q=x%20y")
        var json = JSONRequestSerializer()
        json.writingOptions = [.sortedKeys]
        let post = try json.request(method: "POST", urlString: "https://e.com", parameters: value)
        XCTAssertEqual(post.httpBody.map { String(decoding: $0, as: UTF8.self) },
                       #"{"filters":["a","b"],"page":2,"q":"x y"}"#)
    }

    /// Models inside an array or a dictionary are written as their `Encodable` conformance
    /// writes them (they were refused: "has no JSON form"); a `Date` there still needs the
    /// caller's choice of form.
    func testModelsInsideCollectionsAreEncoded() throws {
        struct Item: Encodable, Sendable { let id: Int; let title: String }
        var json = JSONRequestSerializer()
        json.writingOptions = [.sortedKeys]
        let array = try json.request(method: "POST", urlString: "https://e.com", parameters: [Item(id: 1, title: "t")])
        XCTAssertEqual(array.httpBody.map { String(decoding: $0, as: UTF8.self) }, #"[{"id":1,"title":"t"}]"#)
        let nested: [String: any Sendable] = ["items": [Item(id: 2, title: "u")], "count": 1]
        let object = try json.request(method: "POST", urlString: "https://e.com", parameters: nested)
        XCTAssertEqual(object.httpBody.map { String(decoding: $0, as: UTF8.self) }, #"{"count":1,"items":[{"id":2,"title":"u"}]}"#)
        assertSerializationError(try json.request(method: "POST", urlString: "https://e.com", parameters: ["at": Date()]))
    }

    func testQueryParametersMustBeKeyed() {
        assertSerializationError(try HTTPRequestSerializer().request(
            method: "GET", urlString: "https://e.com", parameters: [1, 2])) {
            guard case .invalidParameters = $0 else { return XCTFail("\($0)") }
        }
        assertSerializationError(try HTTPRequestSerializer().request(
            method: "POST", urlString: "https://e.com", parameters: "just a string"))
    }

    func testJSONRequestSerializer() throws {
        var serializer = JSONRequestSerializer()
        serializer.writingOptions = [.sortedKeys]
        let parameters: [String: any Sendable] = ["b": [1, 2.5, true, NSNull()] as [any Sendable], "a": "x/y"]
        let request = try serializer.request(method: "POST", urlString: "https://e.com", parameters: parameters)
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Type"), "application/json")
        let body = try XCTUnwrap(request.httpBody)
        XCTAssertEqual(try JSONDecoder().decode(JSONValue.self, from: body),
                       ["a": "x/y", "b": [1, 2.5, true, nil]])
        XCTAssertEqual(String(decoding: body, as: UTF8.self), #"{"a":"x\/y","b":[1,2.5,true,null]}"#)
        // Arrays at the top level and JSONValue parameters.
        let array = try serializer.request(method: "PUT", urlString: "https://e.com", parameters: [1, 2])
        XCTAssertEqual(array.httpBody.map { String(decoding: $0, as: UTF8.self) }, "[1,2]")
        let value: JSONValue = ["k": [1, "two"]]
        let fromValue = try serializer.request(method: "PATCH", urlString: "https://e.com", parameters: value)
        XCTAssertEqual(fromValue.httpBody.map { String(decoding: $0, as: UTF8.self) }, #"{"k":[1,"two"]}"#)
        // GET still uses the query.
        let get = try serializer.request(method: "GET", urlString: "https://e.com", parameters: ["a": 1])
        XCTAssertEqual(get.url?.query, "a=1")
        XCTAssertNil(get.httpBody)
    }

    func testInvalidJSONParametersThrow() {
        let serializer = JSONRequestSerializer()
        assertSerializationError(try serializer.request(method: "POST", urlString: "https://e.com",
                                                        parameters: ["date": Date()])) {
            guard case .invalidParameters(let reason, _) = $0 else { return XCTFail("\($0)") }
            XCTAssertTrue(reason.contains("date"), reason)
        }
        assertSerializationError(try serializer.request(method: "POST", urlString: "https://e.com",
                                                        parameters: ["x": Double.nan]))
        assertSerializationError(try serializer.request(method: "POST", urlString: "https://e.com", parameters: 42))
        struct Failing: Encodable, Sendable {
            func encode(to encoder: any Encoder) throws { throw EncodingError.invalidValue(0, .init(codingPath: [], debugDescription: "no")) }
        }
        assertSerializationError(try serializer.request(method: "POST", urlString: "https://e.com",
                                                        parameters: Failing())) {
            XCTAssertNotNil($0.underlyingError)
        }
        var fragments = JSONRequestSerializer()
        fragments.writingOptions = [.fragmentsAllowed]
        XCTAssertEqual(try fragments.request(method: "POST", urlString: "https://e.com", parameters: 42).httpBody,
                       Data("42".utf8))
    }

    func testPropertyListRequestSerializer() throws {
        let serializer = PropertyListRequestSerializer()
        let request = try serializer.request(method: "POST", urlString: "https://e.com",
                                             parameters: ["name": "x", "n": 3, "flag": true] as [String: any Sendable])
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Type"), "application/x-plist")
        let body = try XCTUnwrap(request.httpBody)
        let decoded = try PropertyListSerialization.propertyList(from: body, options: [], format: nil) as? [String: Any]
        XCTAssertEqual(decoded?["name"] as? String, "x")
        XCTAssertEqual(decoded?["n"] as? Int, 3)
        XCTAssertEqual(decoded?["flag"] as? Bool, true)

        var binary = PropertyListRequestSerializer()
        binary.format = .binary
        let binaryBody = try XCTUnwrap(binary.request(method: "POST", urlString: "https://e.com",
                                                      parameters: ["a": [1, 2]]).httpBody)
        XCTAssertTrue(binaryBody.starts(with: Data("bplist".utf8)))

        struct Item: Codable, Sendable, Equatable { let id: Int; let title: String }
        let encoded = try XCTUnwrap(serializer.request(method: "POST", urlString: "https://e.com",
                                                       parameters: Item(id: 1, title: "t")).httpBody)
        XCTAssertEqual(try PropertyListDecoder().decode(Item.self, from: encoded), Item(id: 1, title: "t"))

        let none: Int? = nil
        assertSerializationError(try serializer.request(method: "POST", urlString: "https://e.com",
                                                        parameters: ["missing": none])) {
            guard case .invalidParameters = $0 else { return XCTFail("\($0)") }
        }
    }

    /// A property list's dictionary keys are strings (AFNetworking's
    /// `NSPropertyListSerialization` refuses others): any other key, at any depth, is a typed
    /// error naming where it is.
    func testPropertyListRequestSerializerRefusesNonStringKeys() {
        let serializer = PropertyListRequestSerializer()
        enum Key: Hashable, Sendable { case a }
        let cases: [(parameters: any Sendable, path: String)] = [
            ([1: "one"] as [Int: String], "top level"),
            ([Key.a: 1] as [Key: Int], "top level"),
            (["outer": [2: "two"] as [Int: String]] as [String: any Sendable], "outer"),
            (["list": [["ok": 1] as [String: any Sendable], [3.5: "x"] as [Double: String]] as [any Sendable]]
                as [String: any Sendable], "list[1]"),
            ([[true: "yes"] as [Bool: String]] as [any Sendable], "[0]"),
            (["deep": ["er": [UUID(): 1] as [UUID: Int]] as [String: any Sendable]] as [String: any Sendable],
             "deep.er"),
        ]
        for (parameters, path) in cases {
            assertSerializationError(try serializer.request(method: "POST", urlString: "https://e.com",
                                                            parameters: parameters)) { error in
                guard case .invalidParameters(let reason, _) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(reason.contains("key"), reason)
                XCTAssertTrue(reason.contains(path), "\(reason) should name \(path)")
            }
        }
        // String-keyed dictionaries of every spelling still work.
        XCTAssertNoThrow(try serializer.request(method: "POST", urlString: "https://e.com",
                                                parameters: ["a": 1] as [String: Int]))
        XCTAssertNoThrow(try serializer.request(method: "POST", urlString: "https://e.com",
                                                parameters: ["a": ["b": 1] as [String: Int]]))
    }

    func testSerializersAreEditableThroughTheProtocol() throws {
        var serializer: any HTTPRequestSerializing = JSONRequestSerializer()
        serializer.setValue("v", forHTTPHeaderField: "X-Edit")
        serializer.timeoutInterval = 5
        let request = try serializer.request(method: "GET", urlString: "https://e.com", parameters: nil)
        XCTAssertEqual(request.value(forHTTPHeaderField: "X-Edit"), "v")
        XCTAssertEqual(request.timeoutInterval, 5)
    }
}
