import Foundation
@testable import Serialization

// Target: the query-string encoder (Sources/Serialization/QueryString.swift), as a round trip.
// The input is read as parameters: string keys with strings, numbers, booleans, arrays and
// nested dictionaries. Property: splitting the encoded string on `&` and the first `=` and
// percent-decoding each side gives back exactly the encoder's own pairs, in order — so no key
// or value can add, split or merge a pair, and the escaping loses nothing.

private func value(_ input: inout FuzzInput, depth: Int) -> any Sendable {
    let kind = input.byte()
    switch kind % 8 {
    case 0: return Int(Int8(bitPattern: input.byte())) * Int(input.byte())
    case 1: return input.byte() & 1 == 1
    case 2: return Double(Int16(bitPattern: UInt16(input.byte()) << 8 | UInt16(input.byte()))) / 7
    case 3 where depth < 3:
        let count = Int(input.byte() % 4)
        return (0..<count).map { _ in input.string(until: 0) }
    case 4 where depth < 3:
        var nested: [String: any Sendable] = [:]
        for _ in 0..<Int(input.byte() % 4) { nested[input.string(until: 0)] = value(&input, depth: depth + 1) }
        return nested
    default: return input.string(until: 0)
    }
}

private func decode(_ text: Substring) -> String? {
    String(text).removingPercentEncoding
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQueryString(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    var parameters: [String: any Sendable] = [:]
    while !input.isEmpty, parameters.count < 16 {
        let key = input.string(until: 0)
        parameters[key] = value(&input, depth: 0)
    }
    let encoded = queryString(from: parameters)
    fuzzCheck(encoded.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") }, "unsafe byte in \(encoded)")
    guard let pairs = try? QueryStringEncoder.pairs(fromParameters: parameters) else {
        fuzzCheck(false, "a dictionary is refused")
        return 0
    }
    let pieces = encoded.isEmpty ? [] : encoded.split(separator: "&", omittingEmptySubsequences: false)
    fuzzCheck(pieces.count == pairs.count, "\(pairs.count) pairs encode as \(pieces.count): \(encoded)")
    for (piece, pair) in zip(pieces, pairs) {
        let sides = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        fuzzCheck(decode(sides[0]) == pair.field, "field \(pair.field.debugDescription) encoded as \(sides[0])")
        let decodedValue = sides.count > 1 ? decode(sides[1]) : nil
        fuzzCheck(decodedValue == pair.value, "value \(String(describing: pair.value)) encoded as \(piece)")
    }
    return 0
}
