import ArgumentParser
import Foundation
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
    ///
    /// Rewritten as `GET`, the old verb's `-H 'Name: value'` becomes the item `Name:value`
    /// (the request command takes headers as items); its `--metrics`, which the request
    /// command has not, keeps the old verb, which then says what it cannot take.
    static func routingLowercaseGet(_ arguments: [String]) -> [String] {
        guard arguments.first == "get" else { return arguments }
        var positionals = 0
        var isOldForm = true
        var hasMetrics = false
        var rewritten = ["GET"]
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "-H", "--header":
                if index + 1 < arguments.count { rewritten.append(headerItem(arguments[index + 1])) }
                index += 2
            case "--timeout":
                rewritten += arguments[index..<min(index + 2, arguments.count)]
                index += 2
            case "--metrics":
                hasMetrics = true
                index += 1
            case "-h", "--help":
                rewritten.append(argument)
                index += 1
            case _ where argument.hasPrefix("--header="):
                rewritten.append(headerItem(String(argument.dropFirst("--header=".count))))
                index += 1
            case _ where argument.hasPrefix("--timeout="):
                rewritten.append(argument)
                index += 1
            case _ where argument.hasPrefix("-") && argument.count > 1:
                isOldForm = false
                rewritten.append(argument)
                index += 1
            default:
                positionals += 1
                rewritten.append(argument)
                index += 1
            }
        }
        if positionals > 1 { isOldForm = false }
        return isOldForm || hasMetrics ? arguments : rewritten
    }

    /// The old verb's `Name: value` as the request command's item `Name:value`.
    private static func headerItem(_ header: String) -> String {
        guard let colon = header.firstIndex(of: ":") else { return header }
        let name = header[..<colon].trimmingCharacters(in: .whitespaces)
        let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        return name + ":" + value
    }
}
