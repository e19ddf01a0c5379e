import ArgumentParser

/// The output flags of the request commands.
struct OutputOptions: ParsableArguments {
    @Option(name: [.customShort("p"), .customLong("print")], help: ArgumentHelp(
        "What to print: H request head, B request body, h response head, b response body (default: hb on a terminal, b otherwise).",
        valueName: "HBhb"))
    var print: String?

    @Flag(name: [.customShort("v"), .customLong("verbose")], help: "Print the request and the response, then timings and connection facts.")
    var verbose = false

    @Flag(name: .customLong("headers"), help: "Print the response head only (-p h).")
    var headers = false

    @Flag(name: .customLong("body"), help: "Print the response body only (-p b).")
    var body = false

    @Option(name: .customLong("pretty"), help: ArgumentHelp(
        "all: indent JSON and colour; format: indent only; colors: colour only; none (default: all on a terminal, none otherwise).",
        valueName: "all|colors|format|none"))
    var pretty: Pretty?

    @Flag(name: .customLong("check-status"), help: "Exit 3, 4 or 5 for a 3xx, 4xx or 5xx answer (with a warning on stderr when stdout is not a terminal).")
    var checkStatus = false

    func validate() throws {
        if let print, PrintSelection(letters: print) == nil {
            throw ValidationError("--print takes the letters H, B, h and b, not '\(print)'")
        }
    }

    func selection(stdoutIsTerminal: Bool) throws -> PrintSelection {
        try PrintSelection.resolve(print: print, headers: headers, body: body, verbose: verbose, stdoutIsTerminal: stdoutIsTerminal)
    }

    func effectivePretty(stdoutIsTerminal: Bool) -> Pretty {
        Pretty.resolve(pretty, stdoutIsTerminal: stdoutIsTerminal)
    }
}

/// The download flags.
struct DownloadOptions: ParsableArguments {
    @Flag(name: [.customShort("d"), .customLong("download")], help: "Save the body to a file named from Content-Disposition or the URL (never replacing a file: -1, -2 ... are added).")
    var download = false

    @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp(
        "Save the body to FILE instead of stdout (with or without --download); an existing FILE is replaced once the answer arrives; - writes it to stdout as it is.", valueName: "FILE"))
    var output: String?

    @Flag(name: [.customShort("c"), .customLong("continue")], help: "With -d -o FILE: finish an interrupted download of FILE (its resume data, or a HEAD and a Range request).")
    var resume = false
}
