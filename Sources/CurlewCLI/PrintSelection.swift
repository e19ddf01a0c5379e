import ArgumentParser
import Foundation

/// Which parts of the exchange are printed: HTTPie's `--print` letters.
struct PrintSelection: Equatable, Sendable {
    /// `H`: the request head.
    var requestHead = false
    /// `B`: the request body.
    var requestBody = false
    /// `h`: the response head.
    var responseHead = false
    /// `b`: the response body.
    var responseBody = false
    /// `-v`: also the timings and connection facts, after the response on standard output as
    /// the rest of `-v` (on standard error with `--download` and `-o -`, where standard output
    /// is not the exchange's).
    var metrics = false

    /// `b` alone: the response body and nothing else.
    static var bodyOnly: PrintSelection {
        var selection = PrintSelection()
        selection.responseBody = true
        return selection
    }

    /// Parses `--print` letters; nil when a letter is not one of `HBhb`.
    init?(letters: String) {
        for letter in letters {
            switch letter {
            case "H": requestHead = true
            case "B": requestBody = true
            case "h": responseHead = true
            case "b": responseBody = true
            default: return nil
            }
        }
    }

    /// What the flags ask for; `--print` wins over `--headers`/`--body`, which win over `-v`,
    /// which wins over the default (`hb` on a terminal, `b` otherwise).
    static func resolve(
        print letters: String?, headers: Bool, body: Bool, verbose: Bool, stdoutIsTerminal: Bool
    ) throws(ValidationError) -> PrintSelection {
        var selection: PrintSelection
        if let letters {
            guard let parsed = PrintSelection(letters: letters) else {
                throw ValidationError("--print takes the letters H, B, h and b, not '\(letters)'")
            }
            selection = parsed
        } else if headers || body {
            selection = PrintSelection(letters: (headers ? "h" : "") + (body ? "b" : "")) ?? PrintSelection()
        } else if verbose {
            selection = PrintSelection(letters: "HBhb") ?? PrintSelection()
        } else {
            selection = PrintSelection(letters: stdoutIsTerminal ? "hb" : "b") ?? PrintSelection()
        }
        selection.metrics = verbose
        return selection
    }

    private init() {}
}

/// `--pretty`: formatting and colours.
enum Pretty: String, ExpressibleByArgument, CaseIterable, Sendable {
    case all, colors, format, none

    var colors: Bool { self == .all || self == .colors }
    var formats: Bool { self == .all || self == .format }

    /// The default: everything on a terminal (no colours when `NO_COLOR` is set, as
    /// no-color.org asks), nothing when stdout is a pipe or file.
    static func resolve(
        _ given: Pretty?, stdoutIsTerminal: Bool, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Pretty {
        if let given { return given }
        guard stdoutIsTerminal else { return .none }
        let noColor = environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        return noColor ? .format : .all
    }
}
