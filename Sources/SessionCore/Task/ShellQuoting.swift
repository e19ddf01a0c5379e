import Foundation

/// Words for a POSIX shell (dash, bash, zsh): what `curlDescription` writes, and the
/// commands the `curlew` tool suggests.
package enum ShellQuoting {
    /// `text` as one single-quoted word: every byte stands for itself inside `'…'`, and a
    /// `'` is written as `'\''` (close, an escaped quote, reopen).
    package static func quote(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }

    /// `text` as is when every character is one the shell never interprets (letters, digits,
    /// `_@%+=:,./-`), single-quoted otherwise.
    package static func word(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "_@%+=:,./-".unicodeScalars.contains(scalar))
        }
        return plain ? text : quote(text)
    }

    /// A `printf` format that writes exactly `bytes`: printable ASCII as itself, every other
    /// byte (and `'`, `\`, `%`) as a three-digit octal escape, which POSIX `printf` (the
    /// builtin of dash and bash) turns back into that byte, NUL included. Single-quoted.
    static func printfFormat(for bytes: Data) -> String {
        var format = "'"
        format.reserveCapacity(bytes.count * 2 + 2)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "'"), UInt8(ascii: "\\"), UInt8(ascii: "%"):
                format += octal(byte)
            case 0x20...0x7E:
                format.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                format += octal(byte)
            }
        }
        return format + "'"
    }

    private static func octal(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 8)
        return "\\" + String(repeating: "0", count: 3 - digits.count) + digits
    }

    /// `data` as text, when it can be given to curl as a quoted argument and arrive unchanged: UTF-8
    /// (a Swift `String` holds nothing else), no NUL (an argument ends there), not starting
    /// with `@` (curl would read a file of that name), and small enough for one argument
    /// (Linux refuses an argument over 128 KiB; 64 KiB leaves room for the quoting).
    static func argumentText(for data: Data) -> String? {
        guard data.count <= 64 * 1024, !data.contains(0), data.first != UInt8(ascii: "@") else { return nil }
        return String(validating: data, as: UTF8.self)
    }
}
