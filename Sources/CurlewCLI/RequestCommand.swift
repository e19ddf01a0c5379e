import ArgumentParser
import Foundation
import Serialization
import Security
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `curlew [METHOD] URL [ITEM ...]`: the default command.
struct RequestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "request",
        abstract: "Send a request: curlew [METHOD] URL [ITEM ...] (the default command).",
        discussion: """
            METHOD is optional: GET, or POST when items carry data. URL may leave out http://, \
            and :3000/path means http://localhost:3000/path.

            Items:
              Name:value     request header (Name: sends it empty)
              name==value    query parameter
              name=value     string field          name=@file    string field from a file
              name:=json     raw JSON field        name:=@file   raw JSON from a file
              name@file      file field (the body becomes multipart)
              @file          the whole body from a file (@- reads standard input)
            Data fields are a JSON object by default; --form makes them a form (multipart \
            with a file field); --json forces JSON. A backslash makes a separator literal (a\\:b=c).

            On a terminal curlew prints the status line as the server sent it, the headers and \
            the body (JSON indented and coloured, binary bodies as a notice). Otherwise it \
            writes the body alone, byte for byte.

            \(ExitStatus.helpText)
            """)

    @Argument(help: ArgumentHelp("[METHOD] URL [ITEM ...]", valueName: "request"))
    var arguments: [String] = []

    @Flag(name: [.customShort("j"), .customLong("json")], help: "Send data items as JSON (the default), and ask for JSON.")
    var json = false

    @Flag(name: [.customShort("f"), .customLong("form")], help: "Send data items as a form (multipart with a file field).")
    var form = false

    @Option(name: [.customShort("a"), .customLong("auth")], help: ArgumentHelp(
        "Credentials: Basic in the first request, or answering the server's Digest challenge with --auth-type digest.",
        valueName: "USER[:PASSWORD]"))
    var auth: String?

    @Option(name: [.customShort("A"), .customLong("auth-type")], help: ArgumentHelp("basic (the default) or digest.", valueName: "basic|digest"))
    var authType: AuthType = .basic

    @OptionGroup(title: "Output") var output: OutputOptions
    @OptionGroup(title: "Downloads") var download: DownloadOptions
    @OptionGroup(title: "TLS and network") var transport: TransportOptions

    @Option(name: .customLong("session"), help: ArgumentHelp(
        "Keep cookies, and headers per host, between runs in this session (files under ~/.config/curlew/sessions, mode 0600).",
        valueName: "NAME"))
    var session: String?

    @Flag(name: .customLong("curl"), help: "Print the equivalent curl command (secrets as ***) instead of sending.")
    var curl = false

    func validate() throws {
        if json && form { throw ValidationError("--json and --form exclude each other") }
        if download.download && download.output == "-" {
            throw ValidationError("--download saves to a file: leave out -d to write the body to stdout (a file named - is -o ./-)")
        }
        if download.resume && download.output == nil { throw ValidationError("--continue needs --output FILE") }
        if download.resume && !download.download { throw ValidationError("--continue needs --download") }
    }

    func run() async throws {
        do {
            try await perform()
        } catch let failure as ToolFailure {
            throw failure.report()
        } catch let error as RequestLineError {
            throw ToolFailure(.usage, "\(error.description) (see curlew --help)").report()
        } catch let error as BuildError {
            throw ToolFailure(.error, error.description).report()
        }
    }

    private func perform() async throws {
        let line = try RequestLine.parse(arguments)
        let stdout = Terminal.standardOutput
        var store: SessionStore?
        var snapshot = SessionStore.Snapshot()
        var builder = RequestBuilder(line: line, mode: json ? .forcedJSON : (form ? .form : .json))
        if let credentials = AuthType.split(auth), authType == .basic {
            builder.basicCredentials = credentials
        }
        if let session {
            let opened = try SessionStore(name: session)
            builder.baseHeaders = try opened.loadHeaders(for: line.url)
            snapshot.headers = builder.baseHeaders
            store = opened
        }
        let built: BuiltRequest
        do {
            built = try builder.build()
        } catch let error as BuildError {
            throw error
        } catch {
            throw ToolFailure(.error, ToolFailure.oneLine(error))
        }
        guard let url = built.request.url else { throw ToolFailure(.error, "the request has no URL") }
        // Only a GET's answer is continued (as the library resumes only GETs): a HEAD probe and
        // a GET with a POST's fields would continue the file with another request's bytes.
        if download.resume, line.effectiveMethod != "GET" || built.request.httpBody != nil || built.bodyFile != nil
            || built.request.httpBodyStream != nil
        {
            throw ToolFailure(.usage, "--continue continues a GET's answer, not a \(line.effectiveMethod) with a body: left as it is")
        }
        var configuration = transport.configuration(for: url)
        if let store {
            let jar = try store.loadJar()
            snapshot.cookieLines = try SessionStore.cookieLines(of: jar)
            configuration.cookieJar = jar
        }

        // The jar is a reference: the manager fills it, the session saves it afterwards, with
        // what this run changed only (another run of the session may have saved meanwhile).
        // After a failed run only the cookies its servers set are saved (none: nothing is
        // written): headers typed for a run that failed, perhaps before sending anything,
        // do not become the session's.
        let saveSession: (_ succeeded: Bool) throws -> Void = { [builder, snapshot, built] succeeded in
            guard let store else { return }
            var headers = builder.baseHeaders
            if !succeeded {
                guard let jar = configuration.cookieJar, try SessionStore.cookieLines(of: jar) != snapshot.cookieLines else { return }
                try store.save(jar: configuration.cookieJar, headers: headers, for: line.url, since: snapshot)
                return
            }
            for case .header(let name, let value) in line.items {
                // Names are case-insensitive: `X-Api-Key:NEW` replaces a stored `x-api-key`
                // (kept both, the old one could win at the next run). A name typed twice is
                // kept as sent, both values joined.
                for key in headers.keys where key.caseInsensitiveCompare(name) == .orderedSame { headers[key] = nil }
                headers[name] = built.request.value(forHTTPHeaderField: name) ?? value
            }
            try store.save(jar: configuration.cookieJar, headers: headers, for: line.url, since: snapshot)
        }
        if download.download && !curl {
            let stderr = Terminal.standardError
            // The body goes to the file; what else was asked for (-p, --headers, -v) goes to
            // standard error, as HTTPie's --download does.
            let asked = output.print != nil || output.headers || output.body || output.verbose
            var run = DownloadRun(built: built, configuration: configuration, transport: transport, options: download)
            if asked {
                run.printed = try output.selection(stdoutIsTerminal: stderr.isTerminal)
                run.printer = ExchangePrinter(pretty: output.effectivePretty(stdoutIsTerminal: stderr.isTerminal), isTerminal: stderr.isTerminal)
            }
            if let credentials = AuthType.split(auth), authType == .digest { run.digestCredentials = credentials }
            try await Self.savingSession(saveSession) { try await run.run() }
            return
        }

        // A body shown on the terminal or formatted is read whole first: limited. One going
        // to a pipe or `-o FILE` is not held for showing (an upload's answer is collected
        // for another reason, and was never limited).
        let pretty = output.effectivePretty(stdoutIsTerminal: stdout.isTerminal)
        if download.output == nil && (stdout.isTerminal || pretty.formats || pretty.colors) {
            Self.limitCollectedBodies(&configuration)
        }
        let policy = try await transport.securityPolicy(for: url, configuration: configuration)
        let manager = try Exchange.makeManager(
            configuration: configuration, policy: policy, follow: transport.follow, sessionHeaders: built.sessionHeaders)
        try await Exchange.using(manager) {
            if let credentials = AuthType.split(auth), authType == .digest {
                AuthType.answerChallenges(on: manager, user: credentials.user, password: credentials.password)
            }

            if curl {
                let task = Exchange.makeTask(built, manager: manager) { _ in }
                stdout.write(task.curlDescription(showingSecrets: false) + "\n")
                task.cancel()
                return
            }

            // `-o -` keeps standard output for the body alone (it is piped on as bytes): what
            // else was asked for (-p, --headers, -v) goes to standard error, as with --download,
            // and nothing else by default.
            let rawBody = download.output == "-"
            let info = rawBody ? Terminal.standardError : stdout
            let asked = output.print != nil || output.headers || output.body || output.verbose
            let selection =
                rawBody && !asked ? PrintSelection.bodyOnly : try output.selection(stdoutIsTerminal: info.isTerminal)
            let printer = ExchangePrinter(pretty: output.effectivePretty(stdoutIsTerminal: info.isTerminal), isTerminal: info.isTerminal)
            // The request as HTTPie shows it: head, blank line, body, then a blank line before the response.
            if selection.requestHead { info.write(printer.requestHead(built.request)) }
            if selection.requestBody, let body = printer.requestBody(built) {
                if selection.requestHead { info.write("\n") }
                info.write(body)
                if body.last != UInt8(ascii: "\n") { info.write("\n") }
            }
            if selection.requestHead || selection.requestBody { info.write("\n") }

            // Cookies the server set before a failure (a redirect hop's, one beside a cut body)
            // are saved too, as curl's cookie jar keeps them.
            let checkedStatus = try await Self.savingSession(saveSession) { () async throws -> Int32? in
                let writer = ResponseWriter(
                    printer: printer, selection: selection,
                    sink: try ResponseWriter.sink(outputPath: download.output, printsBody: selection.responseBody),
                    canStream: built.bodyFile == nil && built.request.httpBodyStream == nil, checksStatus: output.checkStatus)
                let response = await Exchange.send(built, manager: manager, streamingTo: writer.streams ? writer : nil)
                // A refused write cancelled the transfer: the write is the run's failure.
                if let failure = writer.failure { throw ToolFailure(.error, failure) }
                if case .responseBodyTooLarge(let limit)? = response.error as? SessionError {
                    throw ToolFailure(
                        .error, "the body is larger than \(limit) bytes, too large to show here: save it with -o FILE or -d, or pipe it")
                }
                if let error = response.error { throw ToolFailure(transferError: error) }
                guard let head = response.head else { throw ToolFailure(.error, "no response arrived") }
                try writer.finish(response)
                if transport.follow, (policy?.pinningMode ?? .none) != .none, let target = Exchange.plainRedirectTarget(head) {
                    throw ToolFailure(
                        .error, "not following the redirect to \(target.withoutControlCharacters): the pins hold over https only")
                }
                if selection.metrics, let metrics = response.metrics {
                    info.write("\n" + ExchangePrinter.metricsText(metrics))
                }
                // `--check-status`: the exchange succeeded (its session is saved as such); the
                // status decides the exit code afterwards.
                guard output.checkStatus, let status = ExitStatus.forStatus(head.statusCode) else { return nil }
                if !stdout.isTerminal {
                    Terminal.standardError.write("curlew: warning: HTTP \(head.statusCode) \((head.reasonPhrase ?? "").withoutControlCharacters)\n")
                }
                if let path = download.output, path != "-" {
                    Terminal.standardError.write("curlew: \(path.withoutControlCharacters) left as it was: the status fails the run\n")
                }
                return status.rawValue
            }
            if let checkedStatus { throw ExitCode(checkedStatus) }
        }
    }

    /// Runs `body`, then saves the session, telling `save` whether the run succeeded. A save
    /// that fails after a failed run is a warning: the run's own failure is what the exit
    /// code reports.
    static func savingSession<T>(_ save: (_ succeeded: Bool) throws -> Void, _ body: () async throws -> T) async throws -> T {
        let result: T
        do {
            result = try await body()
        } catch {
            do {
                try save(false)
            } catch let saveError {
                Terminal.standardError.write("curlew: warning: the session was not saved: \(ToolFailure.oneLine(saveError))\n")
            }
            throw error
        }
        try save(true)
        return result
    }

    /// The most body bytes a run holds to show: a body shown on a terminal or formatted
    /// (`--pretty`) is collected before it is written; a larger one (a 4 GB image on a
    /// terminal) fails the run instead of filling the memory. Bodies going to a pipe or
    /// `-o FILE`, and downloads, are not limited.
    static let collectedBodyLimit = 256 << 20

    /// Sets `collectedBodyLimit` unless the configuration has a limit of its own.
    static func limitCollectedBodies(_ configuration: inout SessionConfiguration) {
        if configuration.maximumCollectedBodyBytes <= 0 { configuration.maximumCollectedBodyBytes = collectedBodyLimit }
    }
}
