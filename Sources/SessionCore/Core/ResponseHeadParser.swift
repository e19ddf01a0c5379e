import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Turns the header lines libcurl hands to `CURLOPT_HEADERFUNCTION` into a response head.
///
/// libcurl calls the header callback once per line, status line included, for every
/// response it reads: interim `1xx` responses and the final one. Interim heads are
/// dropped; the final head completes at its empty line. Lines after that are trailers.
struct ResponseHeadParser {
    /// What a line did to the parser's state.
    enum Event: Equatable {
        /// Keep going.
        case needMore
        /// The final head is complete: build the response now.
        case headComplete
        /// The head is not valid HTTP.
        case invalid(String)
        /// The head is larger than allowed.
        case tooLarge
    }

    private(set) var statusCode = 0
    private(set) var httpVersion = "HTTP/1.1"
    /// Fields in arrival order; names as the server spelled them.
    private(set) var fields: [(name: String, value: String)] = []
    private(set) var isComplete = false
    private(set) var headBytes = 0
    private var sawStatusLine = false
    let maximumBytes: Int

    init(maximumBytes: Int) {
        self.maximumBytes = maximumBytes
    }

    /// Forgets everything, for the next response on a redirected or retried request.
    mutating func reset() {
        self = ResponseHeadParser(maximumBytes: maximumBytes)
    }

    /// Feeds one raw header line (with its CRLF) to the parser.
    mutating func consume(_ bytes: UnsafeRawBufferPointer) -> Event {
        if isComplete { return .needMore }  // trailers: ignored
        headBytes += bytes.count
        if headBytes > maximumBytes { return .tooLarge }

        var line = Substring(decoding: bytes, as: UTF8.self)
        // "\r\n" is a single Character (one grapheme cluster), so test isNewline.
        while let last = line.last, last.isNewline { line = line.dropLast() }

        if line.isEmpty {
            guard sawStatusLine else { return .invalid("empty line before the status line") }
            // 1xx heads (100 Continue, 103 Early Hints) are interim: the real one follows.
            // 101 Switching Protocols is final, but Curlew never asks for an upgrade.
            if (100..<200).contains(statusCode) && statusCode != 101 {
                sawStatusLine = false
                fields.removeAll(keepingCapacity: true)
                return .needMore
            }
            isComplete = true
            return .headComplete
        }
        if line.hasPrefix("HTTP/") {
            return parseStatusLine(line)
        }
        guard sawStatusLine else { return .invalid("header field before the status line") }
        if let first = line.first, first == " " || first == "\t" {
            // obs-fold continuation (RFC 9112 §5.2): joins the previous field's value.
            guard !fields.isEmpty else { return .invalid("continuation line without a field") }
            let continuation = line.trimmingCharacters(in: .whitespaces)
            fields[fields.count - 1].value += " " + continuation
            return .needMore
        }
        guard let colon = line.firstIndex(of: ":") else {
            return .invalid("header line without a colon")
        }
        let name = line[..<colon]
        guard HTTPHeaderValidation.isToken(name) else {
            return .invalid("invalid header field name")
        }
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        fields.append((String(name), value))
        return .needMore
    }

    private mutating func parseStatusLine(_ line: Substring) -> Event {
        // "HTTP/1.1 200 OK", "HTTP/2 204" — reason phrases are optional.
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[1].count == 3, let code = Int(parts[1]), (100...999).contains(code) else {
            return .invalid("malformed status line '\(line.prefix(80))'")
        }
        httpVersion = String(parts[0])
        statusCode = code
        fields.removeAll(keepingCapacity: true)
        sawStatusLine = true
        return .needMore
    }

    /// The fields folded into a dictionary: repeated fields are joined with ", "
    /// (RFC 9110 §5.3), the form `HTTPURLResponse` keeps.
    var headerDictionary: [String: String] {
        var result: [String: String] = [:]
        var canonicalNames: [String: String] = [:]
        for (name, value) in fields {
            let key = name.lowercased()
            if let existing = canonicalNames[key] {
                result[existing, default: ""] += ", " + value
            } else {
                canonicalNames[key] = name
                result[name] = value
            }
        }
        return result
    }

    /// All values of one field, case-insensitively, in arrival order.
    func values(for name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    /// Builds the response for `url`; nil only if Foundation refuses the values.
    func makeResponse(url: URL) -> HTTPURLResponse? {
        HTTPURLResponse(url: url, statusCode: statusCode, httpVersion: httpVersion, headerFields: headerDictionary)
    }
}
