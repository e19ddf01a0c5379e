import Foundation

/// Reading a `Content-Range` value: where a 206's bytes lie in the representation.
extension DownloadFile {
    /// The positions of a `Content-Range: bytes first-last/length` value, parsed as bytes
    /// (nil when absent, malformed, or of unknown length "*").
    static func parse(contentRange value: String?) -> (first: Int64, last: Int64, length: Int64)? {
        guard let value else { return nil }
        var bytes = Substring(value).utf8.drop { $0 == UInt8(ascii: " ") }
        let unit = Array("bytes".utf8)
        guard bytes.starts(with: unit) else { return nil }
        bytes = bytes.dropFirst(unit.count).drop { $0 == UInt8(ascii: " ") }
        func number(_ terminator: UInt8?) -> Int64? {
            var result: Int64 = 0
            var digits = 0
            while let byte = bytes.first, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                let (times, overflow1) = result.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                result = sum
                digits += 1
                bytes = bytes.dropFirst()
            }
            guard digits > 0 else { return nil }
            if let terminator {
                guard bytes.first == terminator else { return nil }
                bytes = bytes.dropFirst()
            }
            return result
        }
        guard let first = number(UInt8(ascii: "-")), let last = number(UInt8(ascii: "/")), let length = number(nil),
            first <= last, last < length, bytes.allSatisfy({ $0 == UInt8(ascii: " ") })
        else { return nil }
        return (first, last, length)
    }
}
