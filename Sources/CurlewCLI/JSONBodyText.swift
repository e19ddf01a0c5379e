import Foundation

/// The JSON object of a request's data items, written as text.
///
/// A `name:=json` value goes into the body as the user wrote it, once `JSONSerialization`
/// accepted it: parsed and encoded again, `id:=12345678901234567890` was sent as
/// `1.2345678901234567e+19` and `v:=1.0` as `1` (numbers pass through a `Double`). The response
/// side already prints numbers as spelled; the request side now sends them so. Members are
/// sorted by name; strings are encoded by `JSONEncoder` without escaping slashes.
struct JSONBodyText {
    /// Each member's value as JSON text.
    private var members: [String: String] = [:]

    /// Adds `name` with `text`, a complete JSON text. A name given again makes an array: the
    /// new value is appended to an array given first (`tags:='["a"]' tags=b`), or joins the
    /// earlier value in a new one.
    mutating func add(_ name: String, jsonText text: String) {
        guard let earlier = members[name] else {
            members[name] = text
            return
        }
        members[name] = Self.appending(text, to: earlier)
    }

    /// Adds `name` with a string value.
    mutating func add(_ name: String, string: String) throws {
        add(name, jsonText: try Self.encoded(string))
    }

    /// The object's text: `{"a":1,"b":"x"}`.
    func text() throws -> String {
        var parts: [String] = []
        for name in members.keys.sorted() {
            guard let value = members[name] else { continue }
            parts.append(try Self.encoded(name) + ":" + value)
        }
        return "{" + parts.joined(separator: ",") + "}"
    }

    /// `element` appended to `earlier`: inside it when it is an array, else both in a new one.
    static func appending(_ element: String, to earlier: String) -> String {
        let trimmed = earlier.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("["), trimmed.hasSuffix("]") else { return "[" + earlier + "," + element + "]" }
        let inside = trimmed.dropFirst().dropLast()
        let isEmpty = inside.allSatisfy { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        return "[" + (isEmpty ? "" : inside + ",") + element + "]"
    }

    /// A string as a JSON string literal.
    static func encoded(_ string: String) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return String(decoding: try encoder.encode(string), as: UTF8.self)
    }
}
