/// One request item of `curlew [METHOD] URL [ITEM ...]`, in HTTPie's grammar.
///
/// The separator that comes first in the text wins (the longest one at that place), so a
/// header value may hold `=` or `@` and a field value may hold `:`. A backslash makes the
/// next separator character literal: `a\:b=c` is the field `a:b`.
enum RequestItem: Equatable, Sendable {
    /// `Name:value`, a request header; `Name:` sends it empty.
    case header(name: String, value: String)
    /// `name==value`, a query parameter added to the URL.
    case query(name: String, value: String)
    /// `name=value`, a string field of the body.
    case field(name: String, value: String)
    /// `name=@path`, a string field whose value is the file's text.
    case fieldFromFile(name: String, path: String)
    /// `name:=json`, a field whose value is raw JSON (`n:=3`, `ok:=true`, `tags:='["a"]'`).
    case jsonField(name: String, json: String)
    /// `name:=@path`, a raw JSON field read from a file.
    case jsonFieldFromFile(name: String, path: String)
    /// `name@path`, a file field: the body becomes multipart.
    case fileField(name: String, path: String)
    /// `@path`, the whole request body from a file; `@-` reads it from standard input.
    case body(path: String)

    /// Whether the item puts something in the body (which makes the default method POST).
    var carriesData: Bool {
        switch self {
        case .header, .query: return false
        default: return true
        }
    }

    /// The separators, longest first where one begins another.
    private static let separators = [":=@", "=@", "==", ":=", "=", ":", "@"]

    /// Parses one item; nil when the text is no item at all (no separator, or an empty name
    /// where one is needed).
    static func parse(_ text: String) -> RequestItem? {
        let characters = Array(text)
        var name = ""
        var index = 0
        while index < characters.count {
            let character = characters[index]
            if character == "\\", index + 1 < characters.count, ":=@\\".contains(characters[index + 1]) {
                name.append(characters[index + 1])
                index += 2
                continue
            }
            if let separator = separators.first(where: { matches($0, characters, at: index) }) {
                let value = String(characters[(index + separator.count)...])
                return make(separator, name: name, value: value)
            }
            name.append(character)
            index += 1
        }
        return nil
    }

    private static func matches(_ separator: String, _ characters: [Character], at index: Int) -> Bool {
        let wanted = Array(separator)
        guard index + wanted.count <= characters.count else { return false }
        return Array(characters[index..<(index + wanted.count)]) == wanted
    }

    private static func make(_ separator: String, name: String, value: String) -> RequestItem? {
        if separator == "@" && name.isEmpty { return value.isEmpty ? nil : .body(path: value) }
        guard !name.isEmpty else { return nil }
        switch separator {
        case ":=@": return .jsonFieldFromFile(name: name, path: value)
        case "=@": return .fieldFromFile(name: name, path: value)
        case "==": return .query(name: name, value: value)
        case ":=": return .jsonField(name: name, json: value)
        case "=": return .field(name: name, value: value)
        case ":": return .header(name: name, value: value)
        default: return .fileField(name: name, path: value)
        }
    }
}
