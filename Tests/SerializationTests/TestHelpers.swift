import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import Serialization

/// An HTTP response for tests.
func makeResponse(
    status: Int = 200, contentType: String? = nil, url: String = "https://example.com/resource"
) -> HTTPURLResponse {
    var headers: [String: String] = [:]
    if let contentType { headers["Content-Type"] = contentType }
    guard let url = URL(string: url),
          let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)
    else { preconditionFailure("bad test response") }
    return response
}

/// Asserts that `body` throws a `SerializationError` and hands it to `check`.
func assertSerializationError<T>(
    _ body: @autoclosure () throws -> T, file: StaticString = #filePath, line: UInt = #line,
    _ check: (SerializationError) -> Void = { _ in }
) {
    do {
        _ = try body()
        XCTFail("expected a SerializationError", file: file, line: line)
    } catch let error as SerializationError {
        XCTAssertFalse(error.description.isEmpty, file: file, line: line)
        check(error)
    } catch {
        XCTFail("expected a SerializationError, got \(error)", file: file, line: line)
    }
}

/// Reads a whole input stream in chunks of `chunk` bytes.
func drain(_ stream: InputStream, chunk: Int = 64 * 1024) throws -> Data {
    stream.open()
    defer { stream.close() }
    var result = Data()
    var buffer = [UInt8](repeating: 0, count: chunk)
    while true {
        let count = stream.read(&buffer, maxLength: chunk)
        if count < 0 { throw stream.streamError ?? CocoaError(.fileReadUnknown) }
        if count == 0 { break }
        result.append(buffer, count: count)
    }
    return result
}

/// A part recovered by the strict multipart parser.
struct ParsedPart: Equatable {
    var headers: [String: String]
    var body: Data
}

/// A strict multipart/form-data parser: the body must be exactly
/// `--b CRLF headers CRLF CRLF body (CRLF --b CRLF headers CRLF CRLF body)* CRLF --b-- CRLF`.
func parseMultipart(_ body: Data, boundary: String) throws -> [ParsedPart] {
    struct ParseError: Error { let reason: String }
    let bytes = [UInt8](body)
    let opening = Array("--\(boundary)\r\n".utf8)
    let delimiter = Array("\r\n--\(boundary)".utf8)
    let headerEnd = Array("\r\n\r\n".utf8)
    func find(_ needle: [UInt8], from start: Int) -> Int? {
        guard needle.count <= bytes.count else { return nil }
        var index = start
        while index + needle.count <= bytes.count {
            if bytes[index] == needle[0], Array(bytes[index..<(index + needle.count)]) == needle { return index }
            index += 1
        }
        return nil
    }
    guard bytes.starts(with: opening) else { throw ParseError(reason: "missing opening boundary") }
    var position = opening.count
    var parts: [ParsedPart] = []
    while true {
        guard let end = find(headerEnd, from: position) else { throw ParseError(reason: "unterminated headers") }
        let headerText = String(decoding: bytes[position..<end], as: UTF8.self)
        var headers: [String: String] = [:]
        for line in headerText.components(separatedBy: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { throw ParseError(reason: "bad header line \(line)") }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard headers[name] == nil else { throw ParseError(reason: "duplicate header \(name)") }
            headers[name] = value
        }
        let bodyStart = end + headerEnd.count
        guard let next = find(delimiter, from: bodyStart) else { throw ParseError(reason: "unterminated part") }
        parts.append(ParsedPart(headers: headers, body: Data(bytes[bodyStart..<next])))
        position = next + delimiter.count
        let rest = Array(bytes[position...])
        if rest == Array("--\r\n".utf8) { return parts }
        guard rest.starts(with: Array("\r\n".utf8)) else { throw ParseError(reason: "garbage after delimiter") }
        position += 2
    }
}

/// Reads a field such as `VmRSS` or `VmHWM` from /proc/self/status, in kB.
func procStatusKilobytes(_ field: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        let digits = line.split(separator: " ").dropFirst().first { Int($0) != nil }
        return digits.flatMap { Int($0) }
    }
    return nil
}
