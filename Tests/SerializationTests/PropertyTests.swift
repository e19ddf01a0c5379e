import CurlewTestSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import Serialization

/// Randomized round trips (reliability research Q3/Q4), with a fixed seed so failures repeat.
final class PropertyTests: XCTestCase {
    /// The tests' deterministic generator (CurlewTestSupport).
    typealias SeededGenerator = SplitMix64

    static let alphabet: [String] = ["a", "Z", "0", " ", "\"", "\r", "\n", "\\", "&", "=", "%", "+", "#", "[", "]",
                                     "é", "e\u{301}", "👍🏽", "👨‍👩‍👧", "日", "/", "?", ";", ":", "-", "--"]

    static func randomString(_ generator: inout SeededGenerator, maxLength: Int = 12) -> String {
        let length = Int.random(in: 0...maxLength, using: &generator)
        return (0..<length).map { _ in Self.alphabet.randomElement(using: &generator) ?? "a" }.joined()
    }

    func testMultipartInjectionRoundTrip() throws {
        var generator = SeededGenerator(seed: 0xC0FFEE)
        for _ in 0..<300 {
            var expected: [(name: String, fileName: String?, body: Data)] = []
            let partCount = Int.random(in: 1...5, using: &generator)
            let request = try HTTPRequestSerializer().multipartFormRequest(
                method: "POST", urlString: "https://e.com", parameters: nil
            ) { form in
                for _ in 0..<partCount {
                    let name = Self.randomString(&generator)
                    var body = Data((0..<Int.random(in: 0...64, using: &generator)).map { _ in
                        UInt8.random(in: 0...255, using: &generator)
                    })
                    if Bool.random(using: &generator) { body.append(Data("\r\n--".utf8)) }
                    if Bool.random(using: &generator) {
                        let fileName = Self.randomString(&generator)
                        form.appendPart(withFileData: body, name: name, fileName: fileName, mimeType: "application/x-test")
                        expected.append((name, fileName, body))
                    } else {
                        form.appendPart(withFormData: body, name: name)
                        expected.append((name, nil, body))
                    }
                }
            }
            let contentType = try XCTUnwrap(request.value(forHTTPHeaderField: "Content-Type"))
            let boundary = String(contentType.dropFirst("multipart/form-data; boundary=".count))
            let body = try drain(try XCTUnwrap(request.httpBodyStream))
            XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Length"), String(body.count))
            let parts = try parseMultipart(body, boundary: boundary)
            XCTAssertEqual(parts.count, expected.count)
            for (part, wanted) in zip(parts, expected) {
                XCTAssertEqual(part.body, wanted.body)
                let disposition = try XCTUnwrap(part.headers["Content-Disposition"])
                var header = "form-data; name=\"\(escape(wanted.name))\""
                if let fileName = wanted.fileName {
                    header += "; filename=\"\(escape(fileName))\""
                    XCTAssertEqual(part.headers["Content-Type"], "application/x-test")
                    XCTAssertEqual(part.headers.count, 2)
                } else {
                    XCTAssertEqual(part.headers.count, 1)
                }
                XCTAssertEqual(disposition, header)
            }
        }
    }

    private func escape(_ string: String) -> String {
        string.replacingOccurrences(of: "\"", with: "%22").replacingOccurrences(of: "\r", with: "%0D")
            .replacingOccurrences(of: "\n", with: "%0A")
    }

    func testQueryStringRoundTrip() throws {
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<2000 {
            var parameters: [String: String] = [:]
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                parameters[Self.randomString(&generator)] = Self.randomString(&generator, maxLength: 20)
            }
            let query = queryString(from: parameters)
            var decoded: [String: String] = [:]
            for pair in query.split(separator: "&", omittingEmptySubsequences: false) {
                let pieces = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = try XCTUnwrap(String(pieces[0]).removingPercentEncoding)
                let value = try XCTUnwrap(pieces.count > 1 ? String(pieces[1]).removingPercentEncoding : "")
                decoded[key] = value
                XCTAssertFalse(pair.contains(" ") || pair.contains("\r") || pair.contains("#"))
            }
            XCTAssertEqual(decoded, parameters)
            XCTAssertEqual(query.split(separator: "&").map { $0.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0] },
                           parameters.keys.sorted().map { Substring(percentEscapedString($0)) })
        }
    }

    /// The examples shown in Docs/Serialization.md.
    func testDocumentationExamples() throws {
        XCTAssertEqual(queryString(from: ["b": 1, "a": ["x": "y"], "ids": [1, 2]]),
                       "a%5Bx%5D=y&b=1&ids%5B%5D=1&ids%5B%5D=2")
        XCTAssertEqual(percentEscapedString("👍🏽 & more"), "%F0%9F%91%8D%F0%9F%8F%BD%20%26%20more")
        XCTAssertEqual(percentEscapedString("a b&c"), "a%20b%26c")

        struct UnsupportedParameters: Error {}
        var serializer = HTTPRequestSerializer()
        serializer.queryStringSerialization = .custom { _, parameters in
            guard let values = parameters as? [String: String] else { throw UnsupportedParameters() }
            return values.keys.sorted().map { "\($0)=\(percentEscapedString(values[$0] ?? ""))" }
                .joined(separator: ";")
        }
        let request = try serializer.request(method: "GET", urlString: "https://httpbin.org/get",
                                             parameters: ["a": "1", "b": "2"])
        XCTAssertEqual(request.url?.absoluteString, "https://httpbin.org/get?a=1;b=2")
    }
}
