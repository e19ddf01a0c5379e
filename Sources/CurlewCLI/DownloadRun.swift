import ArgumentParser
import Foundation
import Security
import Serialization
import SessionCore
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// `--download`: the body streamed to a file through a Curlew download task.
///
/// The body goes to a temporary file in the target's directory (so the final move is a
/// rename), then to its name. Interrupted (Ctrl-C, SIGTERM) or cut off by the network, the
/// task's resume data is kept beside the target as `NAME.curlew-resume`, with the partial
/// bytes in Curlew's temporary file; `--continue` hands it to
/// `downloadTask(withResumeData:)`, which asks for the rest with `Range` and `If-Range`
/// (and starts again from byte 0 if the server's file changed).
struct DownloadRun {
    let built: BuiltRequest
    let configuration: SessionConfiguration
    let transport: TransportOptions
    let options: DownloadOptions
    /// What `-p`, `--headers` or `-v` asked to print (on standard error: the body goes to
    /// the file); nil when none was given.
    var printed: PrintSelection?
    /// How the printed parts look (for standard error).
    var printer = ExchangePrinter(pretty: .none, isTerminal: false)
    /// `--auth-type digest`: the credentials that answer the server's challenge.
    var digestCredentials: (user: String, password: String)?

    /// Whether `target` exists (its link followed) as something other than a regular file or
    /// a directory: a device, a FIFO, a socket.
    static func isSpecialFile(_ target: URL) -> Bool {
        var status = stat()
        guard stat(target.path, &status) == 0 else { return false }
        let type = status.st_mode & S_IFMT
        return type != S_IFREG && type != S_IFDIR
    }

    /// Where a download's resume data is kept.
    static func resumeFile(for target: URL) -> URL {
        URL(fileURLWithPath: target.path + ".curlew-resume")
    }

    private enum Outcome: Sendable {
        case saved(URL, Int64)
        case failed(ToolFailure)
    }

    func run() async throws {
        guard let url = built.request.url else { throw ToolFailure(.error, "the request has no URL") }
        let cwd = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        let target = options.output.map { path -> URL in
            let expanded = (path as NSString).expandingTildeInPath
            return expanded.hasPrefix("/") ? URL(fileURLWithPath: expanded) : cwd.appendingPathComponent(expanded)
        }
        let directory = target?.deletingLastPathComponent() ?? cwd
        // A download is moved into place as a new file: `-o /dev/null` (as root), a FIFO or a
        // socket would be replaced by a regular file, not written to. `-o` without `-d` writes
        // into them.
        if let target, Self.isSpecialFile(target) {
            throw ToolFailure(
                .usage, "\(target.path) is not a regular file: -d saves to a file of its own (leave out -d to write into it)")
        }
        var configuration = self.configuration
        configuration.downloadDirectory = directory

        let policy = try await transport.securityPolicy(for: url, configuration: configuration)
        let manager = try Exchange.makeManager(
            configuration: configuration, policy: policy, follow: transport.follow, sessionHeaders: built.sessionHeaders)
        if let digestCredentials {
            AuthType.answerChallenges(on: manager, user: digestCredentials.user, password: digestCredentials.password)
        }
        try await Exchange.using(manager) {
            try await download(url: url, target: target, directory: directory, manager: manager)
        }
    }

    /// The request as the download sends it: a body from `@file` streamed from the file
    /// (its length declared), as an upload task would send it.
    static func downloadRequest(_ built: BuiltRequest) throws -> URLRequest {
        var request = built.request
        guard let file = built.bodyFile else { return request }
        // stat(2) follows a symbolic link: the length is the file's, not the link's.
        var status = stat()
        guard stat(file.path, &status) == 0, let stream = InputStream(url: file) else {
            throw ToolFailure(.error, "cannot read \(file.path)")
        }
        request.httpBodyStream = stream
        request.setValue(String(status.st_size), forHTTPHeaderField: "Content-Length")
        return request
    }

    /// The largest resume data read (it holds a URL, headers and a few numbers).
    static let maximumResumeFileSize = 1 << 20

    /// Reads the resume data kept beside a target, only from this user's own regular file
    /// that nobody else may write, and not through a link. The download's directory may be
    /// shared (/tmp): a file another user planted there could name one of this user's files
    /// as the partial file to cut and continue, or headers to send with the request.
    static func readOwnResumeFile(_ file: URL) throws -> Data {
        let descriptor = open(file.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw ToolFailure(.error, "cannot read \(file.path): \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid(),
            info.st_mode & 0o022 == 0
        else {
            throw ToolFailure(
                .error, "\(file.path) is not resume data of this user's own (another user's, or others may write it): not used")
        }
        guard let data = try? handle.read(upToCount: maximumResumeFileSize + 1), data.count <= maximumResumeFileSize else {
            throw ToolFailure(.error, "\(file.path) is not resume data curlew can use")
        }
        return data
    }

    private func download(url: URL, target: URL?, directory: URL, manager: URLSessionManager) async throws {
        let stderr = Terminal.standardError

        var resumeData: Data?
        var adopted: URL?
        if options.resume, let target {
            let stored = Self.resumeFile(for: target)
            if DownloadNaming.fileExists(stored) {
                let data = try Self.readOwnResumeFile(stored)
                guard var decoded = try? DownloadResumeData(encoded: data) else {
                    throw ToolFailure(.error, "\(stored.path) is not resume data curlew can use")
                }
                guard decoded.url == url else {
                    throw ToolFailure(.error, "\(stored.lastPathComponent) continues \(decoded.url.absoluteString), not \(url.absoluteString)")
                }
                // The header fields are this run's, not the cut run's: a `--session`'s of that run
                // would go on without the scope that keeps them at their origin (a redirect to
                // another host got them), and a fresh token or header typed now was ignored.
                decoded.headers = DownloadResumeData.resumedHeaders(of: built.request)
                resumeData = decoded.encoded()
            } else if DownloadNaming.fileExists(target) {
                switch try await Self.adopt(target, request: built.request, manager: manager) {
                case .complete(let size):
                    stderr.write("curlew: \(target.lastPathComponent) is already complete (\(size) bytes)\n")
                    return
                case .resume(let data, let partial):
                    resumeData = data
                    adopted = partial
                }
            }
        }
        // A continued download's counts start with the bytes already on disk.
        let startBytes = resumeData.flatMap { try? DownloadResumeData(encoded: $0) }?.bytesReceived ?? 0
        let bar = stderr.isTerminal ? ProgressBar(startBytes: startBytes) : nil
        if let bar {
            manager.setDownloadTaskDidWriteDataBlock { _, _, total, expected in bar.update(written: total, expected: expected) }
        }

        let request = try Self.downloadRequest(built)
        let adoptedPartial = adopted
        if let printed {
            if printed.requestHead { stderr.write(printer.requestHead(request)) }
            if printed.requestBody, let body = printer.requestBody(built) { stderr.write(body) }
            if printed.requestHead || printed.requestBody { stderr.write("\n") }
        }
        let answered = Mutex<DataResponse?>(nil)
        let running = Mutex<DownloadTask?>(nil)
        let follows = transport.follow
        let pinned = !transport.pins.isEmpty || !transport.pinCertificates.isEmpty
        let trap = SignalTrap(queue: DispatchQueue(label: "curlew.signals")) { _ in
            guard let task = running.withLock({ $0 }) else { _exit(ExitStatus.interrupted.rawValue) }
            task.cancel { data in
                Self.interrupted(task: task, data: data, target: target, directory: directory, url: url)
            }
        }
        defer { trap.cancel() }
        let outcome: Outcome = await withCheckedContinuation { continuation in
            let completion: @Sendable (DataResponse) -> Void = { response in
                answered.withLock { $0 = response }
                let resumeData = running.withLock { $0 }?.resumeData
                continuation.resume(
                    returning: Self.finish(
                        response, resumeData: resumeData, target: target, directory: directory, adopted: adoptedPartial,
                        follows: follows, pinned: pinned))
            }
            let task: DownloadTask
            if let resumeData {
                task = manager.downloadTask(withResumeData: resumeData, destination: nil, completionHandler: completion)
            } else {
                task = manager.downloadTask(with: request, destination: nil, completionHandler: completion)
            }
            running.withLock { $0 = task }
            task.resume()
        }
        if case .saved(_, let bytes) = outcome {
            bar?.update(written: bytes, expected: bytes, force: true)  // the last state, not the last one drawn
        }
        if bar != nil { stderr.write("\n") }
        if let printed, let response = answered.withLock({ $0 }) {
            if printed.responseHead, let head = response.head { stderr.write(printer.responseHead(head)) }
            if printed.metrics, let metrics = response.metrics { stderr.write(ExchangePrinter.metricsText(metrics)) }
        }
        switch outcome {
        case .saved(let file, let bytes):
            stderr.write("curlew: saved \(file.lastPathComponent) (\(bytes) bytes)\n")
        case .failed(let failure):
            throw failure
        }
    }

    /// Moves a finished download into place, or says why not (on the completion queue,
    /// before Curlew removes the temporary file).
    private static func finish(
        _ response: DataResponse, resumeData: Data?, target: URL?, directory: URL, adopted: URL?, follows: Bool, pinned: Bool
    ) -> Outcome {
        if let error = response.error {
            var failure = ToolFailure(transferError: error)
            // A lost connection or a timeout leaves the task's resume data; an error status
            // answering a resumed download carries new resume data in the error.
            var kept = resumeData
            if case .resumeFailed(_, let data)? = error as? SessionError { kept = data ?? kept }
            if let kept, let name = target ?? response.head.map({ planned($0, directory: directory) }),
                (try? SessionStore.writePrivately(kept, to: resumeFile(for: name))) != nil
            {
                failure.message += " (kept for --continue: \(resumeFile(for: name).lastPathComponent))"
            } else if let adopted, let target, !DownloadNaming.fileExists(target) {
                // The user's partial file goes back under its own name, untouched.
                rename(adopted.path, target.path)
            }
            return .failed(failure)
        }
        guard let head = response.head, let temporary = response.fileURL else {
            return .failed(ToolFailure(.error, "no response arrived"))
        }
        guard (200..<300).contains(head.statusCode) else {
            // Curlew removes the file after this handler; the tool may exit before that.
            unlink(temporary.path)
            if follows, pinned, let plain = Exchange.plainRedirectTarget(head) {
                // Followed everywhere else: a pinned run stops at a hop to plain http (`Exchange`).
                return .failed(ToolFailure(
                    .error, "not following the redirect to \(plain.withoutControlCharacters): the pins hold over https only; nothing saved"))
            }
            let status = ExitStatus.forStatus(head.statusCode) ?? .error
            let hint = (300..<400).contains(head.statusCode) && !follows ? " (add --follow to follow redirects)" : ""
            return .failed(ToolFailure(status, "HTTP \(head.statusCode) \(head.reasonPhrase ?? ""): nothing saved\(hint)"))
        }
        let bytes = (try? FileManager.default.attributesOfItem(atPath: temporary.path)[.size] as? Int64) ?? 0
        if let target {
            guard rename(temporary.path, target.path) == 0 else {
                return .failed(ToolFailure(.error, "cannot save \(target.path): \(String(cString: strerror(errno)))"))
            }
            unlink(resumeFile(for: target).path)
            makeReadable(target)
            return .saved(target, bytes)
        }
        let name = DownloadNaming.fileName(
            contentDisposition: head.value(forHTTPHeaderField: "Content-Disposition"), url: head.url,
            mimeType: head.mimeType)
        // link(2) never replaces a file: a name taken meanwhile moves on to the next one.
        for _ in 0..<100 {
            let candidate = DownloadNaming.unusedName(name, in: directory)
            if link(temporary.path, candidate.path) == 0 {
                unlink(temporary.path)
                makeReadable(candidate)
                return .saved(candidate, bytes)
            }
            guard errno == EEXIST else { break }
        }
        return .failed(ToolFailure(.error, "cannot save \(name) in \(directory.path): \(String(cString: strerror(errno)))"))
    }

    /// Gives a saved file the mode a new file of the user's gets (0666 less the umask):
    /// Curlew keeps partial downloads private (0600), a finished one is the user's file.
    private static func makeReadable(_ file: URL) {
        let mask = umask(0o022)
        umask(mask)
        chmod(file.path, 0o666 & ~mask)
    }

    /// The name a download would be saved under now: from the response, whose URL is the
    /// last of a chain of redirects followed (`/latest` redirected to `/app-1.2.zip` saves
    /// `app-1.2.zip`, as HTTPie does; the name is sanitised as any server's suggestion is).
    private static func planned(_ head: HTTPResponseHead, directory: URL) -> URL {
        let name = DownloadNaming.fileName(
            contentDisposition: head.value(forHTTPHeaderField: "Content-Disposition"), url: head.url,
            mimeType: head.mimeType)
        return DownloadNaming.unusedName(name, in: directory)
    }

    /// The command that continues an interrupted download: the one that was run, every flag
    /// kept (`--follow`, `--verify`, a proxy, the output's directory: the resume data lies beside
    /// the file-to-be and holds the first URL), with `-c` added, and `-o` with the name chosen
    /// from the answer when none was given (`name`). No credential goes into a terminal's
    /// scrollback or a log: an `--auth` value is written as `USER:PASSWORD`, a credential
    /// header item's value (`Authorization`, `Proxy-Authorization`, `Cookie`) as `VALUE`, and a
    /// URL's user information as `USER:PASSWORD@`.
    static func continuationCommand(arguments: [String], name: URL?) -> String {
        var words: [String] = []
        var hidesNext = false
        var continues = false
        for argument in arguments {
            if hidesNext {
                words.append("USER:PASSWORD")
                hidesNext = false
                continue
            }
            if argument == "-a" || argument == "--auth" {
                hidesNext = true
            } else if argument.hasPrefix("--auth=") {
                words.append("--auth=USER:PASSWORD")
                continue
            }
            if argument == "-c" || argument == "--continue"
                || (argument.hasPrefix("-") && !argument.hasPrefix("--") && argument.dropFirst().allSatisfy(\.isLetter)
                    && argument.contains("c"))
            {
                continues = true
            }
            words.append(Self.withoutCredentials(argument))
        }
        var added: [String] = continues ? [] : ["-c"]
        if let name { added += ["-o", name.lastPathComponent] }
        // After the subcommand when it was named: before it, `-c` would make the parser take
        // the default one and `request` for the method.
        let subcommand = words.first == "request" ? ["request"] : []
        let rest = subcommand.isEmpty ? words : Array(words.dropFirst())
        return (["curlew"] + (subcommand + added + rest).map(ShellQuoting.word)).joined(separator: " ")
    }

    /// `argument` with the credential it carries replaced by a placeholder: a credential header
    /// item (`Authorization:Bearer …`) or a URL with user information.
    static func withoutCredentials(_ argument: String) -> String {
        if let colon = argument.firstIndex(of: ":"),
            ["authorization", "proxy-authorization", "cookie"].contains(argument[..<colon].lowercased())
        {
            return argument[...colon] + "VALUE"
        }
        if let scheme = argument.range(of: "://"), let at = argument[scheme.upperBound...].firstIndex(of: "@"),
            !argument[scheme.upperBound..<at].contains(where: { "/?#".contains($0) })
        {
            return argument[..<scheme.upperBound] + "USER:PASSWORD" + argument[at...]
        }
        return argument
    }

    /// Ctrl-C: keep the resume data beside the file-to-be, say how to continue, exit 130.
    private static func interrupted(task: DownloadTask, data: Data?, target: URL?, directory: URL, url: URL) -> Never {
        let stderr = Terminal.standardError
        if stderr.isTerminal { stderr.write("\n") }
        let name = target ?? task.responseHead.map { planned($0, directory: directory) }
        if let data, let name, (try? SessionStore.writePrivately(data, to: resumeFile(for: name))) != nil {
            stderr.write(
                "curlew: interrupted after \(task.countOfBytesReceived) bytes; continue with: "
                    + continuationCommand(arguments: Array(CommandLine.arguments.dropFirst()), name: target == nil ? name : nil)
                    + "\n")
        } else {
            stderr.write("curlew: interrupted; this download cannot be continued (no ETag or Last-Modified, or nothing received)\n")
        }
        // _exit: no exit handlers, so no OpenSSL cleanup under the driver thread's feet;
        // everything was written with write(2) and the resume data file is closed.
        _exit(ExitStatus.interrupted.rawValue)
    }
}
