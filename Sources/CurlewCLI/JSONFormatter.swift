import Foundation

/// Re-indents JSON text for a terminal, and colours it.
///
/// Works on the text itself, not on parsed values: members stay in the server's order,
/// numbers keep their spelling (`1.0` stays `1.0`, a 20-digit id is not rounded), strings
/// keep their escapes. Only text that `JSONSerialization` accepts is reformatted.
struct JSONFormatter: Sendable {
    var style: ANSIStyle
    var indentWidth = 4
    /// False (`--pretty=colors`): the server's own layout is kept, only coloured.
    var reindents = true
    /// True for a terminal: JSON lets a string carry DEL and the C1 controls (U+0080–U+009F,
    /// among them the 8-bit CSI) unescaped, and the layout may hold a carriage return; each
    /// is shown as `?`, as everything else the server sent to a terminal is. The colours'
    /// own escapes are added after.
    var sanitizes = false

    /// The formatted text, or nil when `data` is not JSON.
    ///
    /// A UTF-8 byte order mark (which `JSONSerialization` skips, and servers on Windows send)
    /// is dropped before the text is walked: kept, it glued itself to the first token.
    func format(_ data: Data) -> String? {
        guard !data.isEmpty, (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil
        else { return nil }
        var bytes = [UInt8](data)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        guard String(validating: bytes, as: UTF8.self) != nil else { return nil }
        return format(valid: bytes)
    }

    /// nil when the brackets do not pair up after all (text `JSONSerialization` read in a way
    /// this walk does not): the caller shows the body as it came.
    private func format(valid bytes: [UInt8]) -> String? {
        var out = ""
        var containers: [UInt8] = []  // "{" or "["
        var expectingKey = false
        var index = 0

        func newline() {
            guard reindents else { return }
            out += "\n" + String(repeating: " ", count: containers.count * indentWidth)
        }

        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case _ where Self.isWhitespace(byte):
                if !reindents { out += sanitizes && byte == 0x0D ? "?" : String(UnicodeScalar(byte)) }
                index += 1
            case UInt8(ascii: "\""):
                var end = index + 1
                while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
                    end += bytes[end] == UInt8(ascii: "\\") ? 2 : 1
                }
                let literal = shown(String(decoding: bytes[index...min(end, bytes.count - 1)], as: UTF8.self))
                out += style.paint(literal, expectingKey ? .boldBlue : .green)
                expectingKey = false
                index = end + 1
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                var after = index + 1
                while after < bytes.count, Self.isWhitespace(bytes[after]) { after += 1 }
                if reindents, after < bytes.count, bytes[after] == close {
                    out += byte == UInt8(ascii: "{") ? "{}" : "[]"
                    index = after + 1
                } else {
                    out += String(UnicodeScalar(byte))
                    containers.append(byte)
                    expectingKey = byte == UInt8(ascii: "{")
                    newline()
                    index += 1
                }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard containers.popLast() != nil else { return nil }
                newline()
                out += String(UnicodeScalar(byte))
                index += 1
            case UInt8(ascii: ","):
                out += ","
                expectingKey = containers.last == UInt8(ascii: "{")
                newline()
                index += 1
            case UInt8(ascii: ":"):
                out += reindents ? ": " : ":"
                index += 1
            default:
                var end = index
                while end < bytes.count, !Self.isDelimiter(bytes[end]) { end += 1 }
                let literal = shown(String(decoding: bytes[index..<end], as: UTF8.self))
                let isNumber = byte == UInt8(ascii: "-") || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                out += style.paint(literal, isNumber ? .cyan : .magenta)
                index = end
            }
        }
        return out
    }

    /// A literal as the output shows it: cleaned of control characters for a terminal.
    private func shown(_ literal: String) -> String {
        sanitizes ? literal.withoutControlCharacters : literal
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    private static func isDelimiter(_ byte: UInt8) -> Bool {
        isWhitespace(byte) || byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]")
            || byte == UInt8(ascii: ":")
    }
}
