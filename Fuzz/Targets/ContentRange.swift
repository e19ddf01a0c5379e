import Foundation

// Target: `Content-Range` parsing (`DownloadFile.parse(contentRange:)`, Sources/SessionCore/Download/
// DownloadFile.swift). Property: it agrees with a plain reference reading of
// `bytes first-last/length` (leading and trailing spaces allowed; numbers that fit Int64;
// first <= last < length).

private func reference(_ value: String) -> (first: Int64, last: Int64, length: Int64)? {
    var text = Substring(value)
    while text.first == " " { text = text.dropFirst() }
    while text.last == " " { text = text.dropLast() }
    guard text.hasPrefix("bytes") else { return nil }
    text = text.dropFirst(5)
    while text.first == " " { text = text.dropFirst() }
    let slash = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard slash.count == 2 else { return nil }
    let dash = slash[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    guard dash.count == 2 else { return nil }
    func number(_ digits: Substring) -> Int64? {
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(digits)
    }
    guard let first = number(dash[0]), let last = number(dash[1]), let length = number(slash[1]),
        first <= last, last < length
    else { return nil }
    return (first, last, length)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContentRange(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let value = String(decoding: UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size), as: UTF8.self)
    let parsed = DownloadFile.parse(contentRange: value)
    let expected = reference(value)
    fuzzCheck(
        parsed?.first == expected?.first && parsed?.last == expected?.last && parsed?.length == expected?.length,
        "\(value.debugDescription): \(String(describing: parsed)) != reference \(String(describing: expected))")
    if let parsed {
        fuzzCheck(parsed.first >= 0 && parsed.first <= parsed.last && parsed.last < parsed.length, "\(parsed)")
    }
    return 0
}
