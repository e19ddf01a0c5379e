import ArgumentParser
import Foundation
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `curlew get URL [-H 'Name: value']... [--metrics]`: the first version's verb, kept for
/// scripts that use it. It prints the status line, the headers and the body whatever stdout
/// is, as it always did; the status line is now the server's own.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Send a GET request and print the status line, headers and body (the first version's verb).")

    @Argument(help: "The URL to fetch (http or https).")
    var url: String

    @Option(name: [.customShort("H"), .customLong("header")], help: "A request header, 'Name: value'. Repeatable.")
    var headers: [String] = []

    @Option(name: .customLong("timeout"), help: "Idle timeout in seconds.")
    var timeout: Double = 60

    @Flag(name: .customLong("metrics"), help: "Print timings and connection facts to standard error.")
    var metrics = false

    func run() async throws {
        var items: [RequestItem] = []
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else {
                throw ValidationError("header '\(header)' must look like 'Name: value'")
            }
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            items.append(.header(name: name, value: value))
        }
        let line: RequestLine
        do {
            line = RequestLine(method: "GET", url: try RequestLine.expandURL(url), items: items)
        } catch {
            throw ValidationError(error.description)
        }
        do {
            let built = try RequestBuilder(line: line).build()
            var configuration = SessionConfiguration.default
            configuration.timeoutIntervalForRequest = timeout
            // The first version followed redirects (the engine's default): so does this verb.
            let manager = try Exchange.makeManager(configuration: configuration, policy: nil, follow: true)
            let response = try await Exchange.using(manager) { await Exchange.send(built, manager: manager) }
            if let error = response.error { throw ToolFailure(transferError: error) }
            guard let head = response.head else { throw ToolFailure(.error, "no response arrived") }
            let stdout = Terminal.standardOutput
            // To a pipe, byte for byte as ever; to a terminal, as the main command prints: no
            // control character of the server's (an OSC 52 clipboard write, a title) reaches
            // it, and a binary body is a notice.
            let printer = ExchangePrinter(pretty: .none, isTerminal: stdout.isTerminal)
            stdout.write(printer.responseHead(head) + "\n")
            stdout.write(printer.responseBody(response.data ?? Data(), head: head))
            if metrics, let facts = response.metrics {
                Terminal.standardError.write(ExchangePrinter.metricsText(facts))
            }
        } catch let failure as ToolFailure {
            throw failure.report()
        } catch {
            throw ToolFailure(.error, ToolFailure.oneLine(error)).report()
        }
    }
}
