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
        await main()
    }
}
