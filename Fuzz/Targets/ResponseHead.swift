import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Target: the response head parser (Sources/SessionCore/Transfer/ResponseHeadParser.swift), fed
// line by line as libcurl's header callback feeds it. Properties checked on every complete head:
// the head has the parser's fields; every name is a non-empty token and every value is free of
// CR, LF and other control bytes (no value can split a header line); the parser's framing
// shortcuts agree with the head's own lookups.

private let url = URL(string: "http://fuzz.invalid/")!

private func isToken(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        return true
    default:
        return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
    }
}

private func check(_ head: HTTPResponseHead, _ parser: ResponseHeadParser) {
    fuzzCheck(head.fieldCount == parser.fieldCount, "field count \(head.fieldCount) != \(parser.fieldCount)")
    fuzzCheck((100...999).contains(head.statusCode), "status \(head.statusCode)")
    for field in head.fields {
        fuzzCheck(!field.name.isEmpty && field.name.utf8.allSatisfy(isToken), "bad name \(field.name.debugDescription)")
        fuzzCheck(
            !field.value.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F },
            "control byte in value \(field.value.debugDescription)")
        fuzzCheck(head.value(forHTTPHeaderField: field.name) != nil, "field \(field.name) not found by name")
    }
    if let length = parser.expectedContentLength, head.values(forHTTPHeaderField: "Content-Length").count == 1 {
        fuzzCheck(length == head.expectedContentLength, "Content-Length \(length) != head's \(head.expectedContentLength)")
    }
    if let coded = parser.hasContentCoding {
        let value = head.value(forHTTPHeaderField: "Content-Encoding")
        fuzzCheck(coded == (value != nil && value?.lowercased() != "identity"), "Content-Encoding \(String(describing: value))")
    }
    _ = head.headerDictionary
    _ = head.mimeType
    _ = head.textEncodingName
    _ = head.httpURLResponse?.allHeaderFields.count
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseHead(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    // A fresh parser per input, so that every crash reproduces from its input alone.
    let parser = ResponseHeadParser(maximumBytes: 64 * 1024)
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    var start = 0
    // libcurl hands over one line at a time, each with its line ending.
    while start < size {
        var end = start
        while end < size, bytes[end] != 0x0A { end += 1 }
        end = min(size, end + 1)
        let event = parser.consume(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
        switch event {
        case .headComplete:
            check(parser.makeHead(url: url), parser)
        case .invalid, .tooLarge:
            return 0
        case .needMore, .nextResponse:
            break
        }
        start = end
    }
    return 0
}
