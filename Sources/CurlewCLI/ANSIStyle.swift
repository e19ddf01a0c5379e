/// The few terminal colours the tool uses (SGR sequences), or none.
struct ANSIStyle: Sendable {
    /// Whether colours are written at all.
    var enabled: Bool

    enum Color: String {
        case reset = "0", bold = "1", dim = "2", red = "31", green = "32", yellow = "33", blue = "34",
            magenta = "35", cyan = "36", boldBlue = "1;34", boldRed = "1;31", boldGreen = "1;32", boldYellow = "1;33"
    }

    /// `text` wrapped in `color` when colours are on.
    func paint(_ text: String, _ color: Color) -> String {
        enabled ? "\u{1B}[\(color.rawValue)m\(text)\u{1B}[0m" : text
    }

    /// The colour of a status code: green for 2xx, yellow for 3xx, red for errors.
    static func color(forStatus code: Int) -> Color {
        switch code {
        case 200..<300: return .boldGreen
        case 300..<400: return .boldYellow
        case 400..<1000: return .boldRed
        default: return .bold
        }
    }
}

extension String {
    /// The text with terminal control characters (ESC, the C0 and C1 controls but tab and
    /// newline) shown as `?`: what a server sends must not drive the user's terminal.
    var withoutControlCharacters: String {
        String(String.UnicodeScalarView(unicodeScalars.map { scalar in
            let value = scalar.value
            let control = (value < 0x20 && value != 0x09 && value != 0x0A) || (0x7F...0x9F).contains(value)
            return control ? "?" : scalar
        }))
    }
}
