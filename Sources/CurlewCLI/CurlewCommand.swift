import ArgumentParser
import Serialization

/// `curlew`: Curlew's command-line HTTP client. The request is the default command, so
/// `curlew URL` and `curlew POST URL a=b` need no verb; `pin`, `reach` and `image` are verbs
/// of their own, and `get` is kept from the first version of the tool.
package struct CurlewCommand: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "curlew",
        abstract: "An HTTP client for the terminal, on Curlew (libcurl multi + OpenSSL, from Swift).",
        discussion: """
            curlew [METHOD] URL [ITEM ...]   sends a request (see `curlew help request`).

            \(ExitStatus.helpText)
            """,
        version: CurlewVersion.string,
        subcommands: [RequestCommand.self, GetCommand.self, PinCommand.self, ReachCommand.self, ImageCommand.self],
        defaultSubcommand: RequestCommand.self)

    package init() {}

    /// Parses the process's arguments and runs the command they name, then exits: the
    /// executable's whole `main.swift`.
    package static func runFromCommandLine() async {
        await main(routingLowercaseGet(Array(CommandLine.arguments.dropFirst())))
    }

    /// The arguments with a lowercase `get` read as the method `GET` unless they are the first
    /// version's form (`get URL [-H ...] [--timeout S] [--metrics]`). The method may be
    /// written in any case, but `get` named the old verb, which knows no request items or
    /// other options: `curlew get URL q==1` was refused, `curlew get URL -p h` too, and the
    /// old verb's printing of the head to a pipe broke `curlew get URL | jq`.
    static func routingLowercaseGet(_ arguments: [String]) -> [String] {
        guard arguments.first == "get" else { return arguments }
        var positionals = 0
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "-H", "--header", "--timeout": index += 2
            case "--metrics", "-h", "--help": index += 1
            case _ where argument.hasPrefix("--header=") || argument.hasPrefix("--timeout="): index += 1
            case _ where argument.hasPrefix("-") && argument.count > 1: return ["GET"] + arguments.dropFirst()
            default:
                positionals += 1
                index += 1
            }
        }
        return positionals > 1 ? ["GET"] + arguments.dropFirst() : arguments
    }
}
