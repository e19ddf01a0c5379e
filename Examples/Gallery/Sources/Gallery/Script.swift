import Foundation

/// A scripted session for tests and demos: steps separated by `;` or newlines.
///
/// - `wait-loaded`: run frames until every visible cell and the button show their own images.
/// - `shot NAME`: draw the current state (running nothing queued first, so the frame is exactly
///   the state now), describe it in `NAME.json` and signal `NAME.ready` in the shots directory,
///   then hold the frame until `NAME.done` appears (the screenshotter took the picture).
/// - `scroll N`: scroll N rows (negative: up), one row per frame, without waiting for images:
///   a fast fling that reuses every cell several times.
/// - `frames N`: run N frames.
/// - `press` / `release`: hold or release the button (its highlighted / normal image).
/// - `quit`: stop (the end of the script does too).
enum ScriptStep: Equatable, Sendable {
    case waitLoaded
    case shot(String)
    case scroll(Int)
    case frames(Int)
    case press
    case release
    case quit

    struct ParseError: Error, CustomStringConvertible {
        let step: String
        var description: String { "bad script step: \"\(step)\"" }
    }

    static func parse(_ script: String) throws -> [ScriptStep] {
        let separators = CharacterSet(charactersIn: ";\n")
        return try script.components(separatedBy: separators).compactMap { raw -> ScriptStep? in
            let words = raw.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard let verb = words.first else { return nil }
            let argument = words.count == 2 ? words[1] : nil
            switch (verb, argument) {
            case ("wait-loaded", nil): return .waitLoaded
            case ("shot", let name?) where name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }):
                return .shot(name)
            case ("scroll", let count?): if let rows = Int(count) { return .scroll(rows) }
            case ("frames", let count?): if let frames = Int(count), frames >= 0 { return .frames(frames) }
            case ("press", nil): return .press
            case ("release", nil): return .release
            case ("quit", nil): return .quit
            default: break
            }
            throw ParseError(step: raw)
        }
    }
}
