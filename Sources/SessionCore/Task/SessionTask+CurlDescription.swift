import Foundation
import Security
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SessionTask {
    /// The `curl` command that sends the same request as ``currentRequest`` (Alamofire's
    /// `cURLDescription`), for a POSIX shell: one option per line, each line but the last
    /// ending with ` \`, so the text runs as it is when pasted.
    ///
    /// It carries what Curlew puts on the wire: the method (`-X` only when curl would not
    /// imply it, `--head` for HEAD), the URL, every header field in Curlew's order — the
    /// request's own, the configuration's `httpAdditionalHeaders` (not the credential ones
    /// after a redirect to another origin), `--compressed` for Curlew's `Accept-Encoding`,
    /// `-H 'User-Agent:'` when the request has none (curl would add its own), `-H 'Expect:'`
    /// where curl would add `Expect: 100-continue` — the body, the cookies of the manager's
    /// jar that match the URL (`-b`), and the manager's proxy (`-x`, `--noproxy`, `-U`), HTTP
    /// version, TLS minimum, `certificateAuthorityFile` (`--cacert`), client certificate
    /// files, pinned public keys (`--pinnedpubkey`), `-k` when the security policy allows
    /// invalid certificates, Unix socket and a resource timeout other than the 7-day default
    /// (`--max-time`).
    ///
    /// The body: UTF-8 text up to 64 KiB as `--data-binary '…'`; other bytes (NUL, invalid
    /// UTF-8, a leading `@`, larger bodies) are written by a `printf '…' |` in front of
    /// `curl … --data-binary @-`, which reproduces them exactly; an upload from a file is
    /// `--data-binary '@/path'`; a body stream is `--data-binary @-`: pipe the stream's bytes
    /// to standard input (with `-H 'Transfer-Encoding: chunked'` when Curlew sends it chunked).
    ///
    /// Secrets are `***` unless `showingSecrets` is true: the values of `Authorization` and
    /// `Proxy-Authorization` (their scheme stays), the values of cookies (their names stay),
    /// the password in the URL and in the proxy URL, the proxy credential's password and the
    /// client key's passphrase.
    ///
    /// Not described: Curlew's idle timeout (curl has none), redirects (curl is not told to
    /// follow them: the description is this one request), a cached response's conditional
    /// fields and a resumed download's `Range`, trusted roots set on the `SecurityPolicy`
    /// itself and a client certificate given as bytes (curl needs files). `--cacert` makes
    /// curl trust that file alone, where Curlew trusts it in addition to the system store;
    /// `--pinnedpubkey` pins the server's own key, where Curlew accepts a pinned key
    /// anywhere in the chain. A request Curlew would refuse to send (a header with a control
    /// character, an unsupported scheme) is described as a shell comment naming the error.
    ///
    /// - Parameter showingSecrets: Write credentials and cookie values as they are.
    /// - Returns: The command, without a trailing newline.
    public func curlDescription(showingSecrets: Bool = false) -> String {
        let (request, bodyFile) = protected.withLock { ($0.currentRequest, $0.bodyFile) }
        guard let request else { return "# Curlew would not send this request: it has none" }
        return CurlCommand(
            request: request, originalURL: originalRequest?.url, bodyFile: bodyFile,
            configuration: engine.configuration, policy: engine.security.policy,
            proxyBypass: engine.proxyBypassAddresses?.bypasses(host: request.url?.host ?? "") == true ? "*" : engine.proxyBypass,
            showingSecrets: showingSecrets
        ).text
    }
}

/// Builds the text of `SessionTask.curlDescription(showingSecrets:)`.
struct CurlCommand {
    let request: URLRequest
    /// The task's first URL: after a redirect to another origin, the configuration's
    /// credential headers are no longer sent.
    let originalURL: URL?
    /// The file an upload from a file sends (not in the request).
    let bodyFile: URL?
    let configuration: SessionConfiguration
    let policy: SecurityPolicy
    /// The manager's `NOPROXY` string (`*` for a request whose IPv6 host the list names:
    /// curl matches no IPv6 entry, so the command says "direct" outright).
    let proxyBypass: String?
    let showingSecrets: Bool

    static let mask = "***"

    var text: String {
        guard let url = request.url else { return "# Curlew would not send this request: it has no URL" }
        let crossed = originalURL.map { !RedirectPolicy.isSameOrigin($0, url) } ?? false
        let prepared: PreparedRequest
        do {
            prepared = try PreparedRequest.prepare(request, configuration: configuration, omittingCredentials: crossed)
        } catch {
            let reason = "\(error)".replacingOccurrences(of: "\n", with: " ")
            return "# Curlew would not send this request: " + reason
        }
        var prefix = ""
        var options: [String] = []
        let urlString = prepared.urlString
        if urlString.contains(where: { "[]{}".contains($0) }) { options.append("--globoff") }  // no curl URL globbing
        // Curlew sends the path as given; curl would remove its dot segments.
        if prepared.url.path.contains("/.") { options.append("--path-as-is") }
        let methodAndBody = methodAndBodyOptions(prepared, prefix: &prefix)
        options += methodAndBody
        options += headerOptions(prepared)
        options += cookieOptions(prepared)
        options += connectionOptions(prepared)
        let first = prefix + "curl " + ShellQuoting.quote(maskingURLPassword(urlString))
        return ([first] + options).joined(separator: " \\\n  ")
    }

    // MARK: - Method and body

    /// The method options and the body (see `TaskDelegate.configureMethodAndBody`: any body,
    /// even an empty one, and POST/PUT/PATCH without one go out with POST mechanics).
    private func methodAndBodyOptions(_ prepared: PreparedRequest, prefix: inout String) -> [String] {
        let method = prepared.method
        if method == "HEAD" { return ["--head"] }
        var body = prepared.body
        if body.isEmpty, let bodyFile, method != "GET" { body = .file(bodyFile) }
        var options: [String] = []
        let carriesBody = !body.isEmpty || method == "POST" || method == "PUT" || method == "PATCH"
        if carriesBody ? method != "POST" : method != "GET" { options.append("-X " + ShellQuoting.word(method)) }
        guard carriesBody else { return options }
        var mayExpect = false  // curl would add `Expect: 100-continue` (over 1 MiB, or unknown size)
        switch body {
        case .none:
            options.append("--data-binary ''")
        case .data(let data):
            if let text = ShellQuoting.argumentText(for: data) {
                options.append("--data-binary " + ShellQuoting.quote(text))
            } else {
                prefix = "printf " + ShellQuoting.printfFormat(for: data) + " | "
                options.append("--data-binary @-")
            }
            mayExpect = data.count > 1 << 20
        case .file(let file):
            options.append("--data-binary " + ShellQuoting.quote("@" + file.path))
            mayExpect = true
        case .stream(_, let length):
            options.append("--data-binary @-")
            if length == nil { options.append("-H 'Transfer-Encoding: chunked'") }
            mayExpect = true
        case .feed(let feed):
            options.append("--data-binary @-")
            if feed.length == nil { options.append("-H 'Transfer-Encoding: chunked'") }
            mayExpect = true
        }
        // Curlew never sends `Expect` unless the request sets it (TaskDelegate.configure).
        if mayExpect && !prepared.hasExpectHeader { options.append("-H 'Expect:'") }
        return options
    }

    // MARK: - Header fields

    private func headerOptions(_ prepared: PreparedRequest) -> [String] {
        var options: [String] = []
        var hasUserAgent = false
        // The last line is Curlew's `Accept-Encoding` (PreparedRequest.prepare), unless the
        // request asks for a byte range as is (no coding asked for, nothing decoded).
        let decodes = prepared.acceptEncoding != nil
        for line in decodes ? prepared.headerLines.dropLast() : prepared.headerLines[...] {
            let name = line.prefix { $0 != ":" && $0 != ";" }
            if name.lowercased() == "user-agent" { hasUserAgent = true }
            options.append("-H " + ShellQuoting.quote(masking(line, name: String(name))))
        }
        if decodes, let last = prepared.headerLines.last, prepared.acceptEncoding?.isEmpty == false {
            options.append("-H " + ShellQuoting.quote(last))
        }
        // Curlew asks for every coding libcurl decodes, or the request's own list, and decodes.
        if decodes { options.append("--compressed") }
        if !hasUserAgent { options.append("-H 'User-Agent:'") }  // libcurl sends none; curl would
        return options
    }

    /// A header line with its secret replaced: `Authorization: Bearer ***`, `Cookie: a=***`.
    private func masking(_ line: String, name: String) -> String {
        guard !showingSecrets, line.hasPrefix(name + ": ") else { return line }
        let value = line.dropFirst(name.count + 2)
        switch name.lowercased() {
        case "authorization", "proxy-authorization":
            // The scheme is no secret and says what kind of credential it is.
            if let space = value.firstIndex(of: " ") { return name + ": " + value[..<space] + " " + Self.mask }
            return name + ": " + Self.mask
        case "cookie":
            return name + ": " + maskingCookieValues(String(value))
        default:
            return line
        }
    }

    /// `a=1; b=2` → `a=***; b=***`.
    private func maskingCookieValues(_ pairs: String) -> String {
        guard !showingSecrets else { return pairs }
        return pairs.split(separator: ";").map { pair -> String in
            let trimmed = pair.drop { $0 == " " }
            guard let equals = trimmed.firstIndex(of: "=") else { return Self.mask }
            return trimmed[..<equals] + "=" + Self.mask
        }.joined(separator: "; ")
    }

    // MARK: - Cookies

    /// The jar's cookies for the URL, when Curlew's cookie engine would send them
    /// (`TaskDelegate.cookieUse`).
    private func cookieOptions(_ prepared: PreparedRequest) -> [String] {
        guard configuration.httpShouldSetCookies, let jar = configuration.cookieJar,
            prepared.handlesCookies, !prepared.hasCookieHeader
        else { return [] }
        let cookies = jar.cookies(matching: prepared.url)
        guard !cookies.isEmpty else { return [] }
        // Every pair holds `=`, so curl reads the word as cookies, never as a file name.
        let pairs = cookies.map(\.headerPair).joined(separator: "; ")
        return ["-b " + ShellQuoting.quote(maskingCookieValues(pairs))]
    }

    // MARK: - Connection

    /// Proxy, HTTP version, TLS, socket and timeout (`TaskDelegate.configure`, `configureTLS`).
    private func connectionOptions(_ prepared: PreparedRequest) -> [String] {
        var options: [String] = []
        var proxyIsHTTPS = false
        switch configuration.proxy {
        case .environment:
            // curl reads the same variables; the bypass list replaces `no_proxy`.
            if let proxyBypass { options.append("--noproxy " + ShellQuoting.quote(proxyBypass)) }
        case .none:
            options.append("--noproxy '*'")
        case .url(let proxy):
            options.append("-x " + ShellQuoting.quote(maskingURLPassword(proxy)))
            if let proxyBypass { options.append("--noproxy " + ShellQuoting.quote(proxyBypass)) }
            proxyIsHTTPS = proxy.lowercased().hasPrefix("https:")
        }
        if configuration.proxy != .none, let credential = configuration.proxyCredential, let user = credential.user {
            let password = showingSecrets ? credential.password ?? "" : Self.mask
            options.append("-U " + ShellQuoting.quote(user + ":" + password))
        }
        if proxyIsHTTPS, let file = configuration.certificateAuthorityFile {
            options.append("--proxy-cacert " + ShellQuoting.quote(file))
        }
        switch configuration.httpVersion {
        case .http1_1: options.append("--http1.1")
        case .http2: break  // curl's own default: HTTP/2 over TLS when offered
        case .http2PriorKnowledge: options.append("--http2-prior-knowledge")
        }
        if prepared.urlOrigin.isHTTPS { options += tlsOptions() }
        if let socket = configuration.unixSocketPath { options.append("--unix-socket " + ShellQuoting.quote(socket)) }
        let resource = configuration.timeoutIntervalForResource
        if resource > 0, resource.isFinite, resource <= 100 * 365 * 24 * 3600, resource != 7 * 24 * 3600 {
            options.append("--max-time " + Self.seconds(resource))
        }
        return options
    }

    private func tlsOptions() -> [String] {
        var options: [String] = []
        switch configuration.tlsMinimumVersion {
        case .tls1_2: options.append("--tlsv1.2")
        case .tls1_3: options.append("--tlsv1.3")
        }
        if let file = configuration.certificateAuthorityFile { options.append("--cacert " + ShellQuoting.quote(file)) }
        if case .pemFiles(let certificate, let key, let passphrase) = configuration.clientCertificate {
            options.append("--cert " + ShellQuoting.quote(certificate.path))
            options.append("--key " + ShellQuoting.quote(key.path))
            if let passphrase { options.append("--pass " + ShellQuoting.quote(showingSecrets ? passphrase : Self.mask)) }
        }
        if policy.pinningMode != .none, !policy.pinnedCertificates.isEmpty {
            let pins = policy.pinnedCertificates.map(\.publicKeySHA256).filter { !$0.isEmpty }.sorted()
            if !pins.isEmpty { options.append("--pinnedpubkey " + ShellQuoting.quote(pins.map { "sha256//" + $0 }.joined(separator: ";"))) }
        }
        if policy.allowInvalidCertificates { options.append("--insecure") }
        return options
    }

    /// Whole seconds when the value is whole, else as written (curl accepts decimals).
    private static func seconds(_ interval: TimeInterval) -> String {
        interval == interval.rounded() ? String(Int64(interval)) : String(interval)
    }

    /// `scheme://user:password@host…` with the password replaced, unless secrets are shown.
    private func maskingURLPassword(_ url: String) -> String {
        guard !showingSecrets, let schemeEnd = url.range(of: "://") else { return url }
        let authorityEnd = url[schemeEnd.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
        let authority = url[schemeEnd.upperBound..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return url }
        return url[..<url.index(after: colon)] + Self.mask + url[at...]
    }
}
