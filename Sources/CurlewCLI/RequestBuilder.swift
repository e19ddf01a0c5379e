import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How data items are encoded.
enum BodyMode: Sendable, Equatable {
    /// A JSON object, the default; a file field still makes the body multipart.
    case json
    /// `--form`: URL-encoded, or multipart as soon as a file field appears.
    case form
    /// `--json`: JSON even where curlew would choose otherwise, and JSON in `Accept`.
    case forcedJSON
}

/// A request ready to send, and how its body travels.
struct BuiltRequest: Sendable {
    /// The request, with its body (`httpBody`, or a multipart `httpBodyStream`).
    var request: URLRequest
    /// `@path`: the file streamed as the whole body.
    var bodyFile: URL?
    /// The headers a `--session` added, kept to their origin across redirects.
    var sessionHeaders: SessionHeaderScope?
}

/// Builds the request from the request line with Serialization's request serializers: the
/// JSON serializer for JSON bodies, the HTTP serializer for forms, its multipart builder for
/// file fields.
struct RequestBuilder {
    var line: RequestLine
    var mode: BodyMode = .json
    /// Headers sent before the items' own (a `--session`'s).
    var baseHeaders: [String: String] = [:]
    /// `--auth` for Basic: an `Authorization` field made by the HTTP request serializer
    /// (an `Authorization:` item wins).
    var basicCredentials: (user: String, password: String)?
    /// Where relative file paths are read from.
    var directory = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)

    /// Reads standard input for `@-` (replaceable in tests).
    var standardInput: () -> Data = { FileHandle.standardInput.readDataToEndOfFile() }

    /// The `Accept` HTTPie sends with JSON.
    static let jsonAccept = "application/json, */*;q=0.5"

    func build() throws -> BuiltRequest {
        let method = line.effectiveMethod
        let urlString = try urlWithQuery().absoluteString
        let items = line.items
        let bodies = items.compactMap { item -> String? in if case .body(let path) = item { return path } else { return nil } }
        let hasFileField = items.contains { if case .fileField = $0 { return true } else { return false } }
        let hasFields = items.contains { $0.carriesData && !{ if case .body = $0 { return true } else { return false } }($0) }
        guard bodies.count <= 1 else { throw BuildError("only one @file body may be given") }
        if !bodies.isEmpty && hasFields { throw BuildError("a body from @file cannot be combined with fields") }
        if hasFileField && mode == .forcedJSON { throw BuildError("file fields (name@file) need a multipart body: drop --json") }

        var built: BuiltRequest
        if bodies.first == "-" {
            // `@-`: the body is standard input, read to its end (JSON unless --form says otherwise).
            var request = try HTTPRequestSerializer().request(method: method, urlString: urlString, parameters: nil)
            request.httpBody = standardInput()
            request.setValue(mode == .form ? "application/x-www-form-urlencoded" : "application/json", forHTTPHeaderField: "Content-Type")
            built = BuiltRequest(request: request)
        } else if let path = bodies.first {
            var serializer = HTTPRequestSerializer()
            serializer.httpMethodsEncodingParametersInURI = []
            let file = resolve(path)
            try requireReadableFile(file, item: "@" + path)
            var request = try serializer.request(method: method, urlString: urlString, parameters: nil)
            request.setValue(MIMETypeTable.mimeType(forPathExtension: file.pathExtension), forHTTPHeaderField: "Content-Type")
            if Self.isRegularFile(file) {
                built = BuiltRequest(request: request, bodyFile: file)
            } else {
                // A pipe (`@<(command)`, `@/dev/stdin`): read once, and its length is known
                // only at its end, so it is read whole, as `@-` is. Streamed as a file, it went
                // out empty (a download declared the length stat gives a pipe, 0) or was refused.
                guard let handle = FileHandle(forReadingAtPath: file.path) else {
                    throw BuildError("'@\(path)': \(file.path) is not a readable file")
                }
                defer { try? handle.close() }
                do {
                    request.httpBody = try handle.readToEnd() ?? Data()
                } catch {
                    // Never an empty body in place of the one that could not be read.
                    throw BuildError("'@\(path)': \(file.path) could not be read: \(error.localizedDescription)")
                }
                built = BuiltRequest(request: request)
            }
        } else if hasFileField || (mode == .form && hasFields) {
            built = BuiltRequest(request: try formRequest(method: method, urlString: urlString, multipart: hasFileField))
        } else if hasFields {
            // Written as text, not through the JSON serializer: a `:=` value's numbers go as
            // typed (`JSONBodyText`).
            var request = try HTTPRequestSerializer().request(method: method, urlString: urlString, parameters: nil)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(try jsonBodyText().utf8)
            request.setValue(Self.jsonAccept, forHTTPHeaderField: "Accept")
            built = BuiltRequest(request: request)
        } else {
            var request = try HTTPRequestSerializer().request(method: method, urlString: urlString, parameters: nil)
            if mode == .forcedJSON { request.setValue(Self.jsonAccept, forHTTPHeaderField: "Accept") }
            built = BuiltRequest(request: request)
        }
        // `--json` asks for JSON whatever the body is (`@file` and `@-` too).
        if mode == .forcedJSON, built.request.value(forHTTPHeaderField: "Accept") == nil {
            built.request.setValue(Self.jsonAccept, forHTTPHeaderField: "Accept")
        }
        for (name, value) in baseHeaders.sorted(by: { $0.key < $1.key }) {
            built.request.setValue(value, forHTTPHeaderField: name)
        }
        // After the session's stored headers: `--auth` on this command line wins over an
        // `Authorization` a session kept (an item typed here wins over both, below).
        if let basicCredentials {
            var serializer = HTTPRequestSerializer()
            serializer.setAuthorizationHeaderField(username: basicCredentials.user, password: basicCredentials.password)
            built.request.setValue(serializer.value(forHTTPHeaderField: "Authorization"), forHTTPHeaderField: "Authorization")
        }
        var typed: [String] = []
        for case .header(let name, let value) in items {
            // Foundation drops a value it finds invalid without a word; the user hears why.
            guard HTTPHeaderValidation.isToken(name) else {
                throw BuildError("'\(name.debugDescription.dropFirst().dropLast())' is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)")
            }
            guard HTTPHeaderValidation.isValidValue(value) else {
                throw BuildError("the value of header \(name) holds a line break or another control character")
            }
            // A name typed again adds a value: the first replaces what a session or a default
            // gave, the next ones join it (`; ` between cookies, a `, ` list otherwise, RFC 9110
            // 5.3), rather than the last silently winning. A field that holds one value only
            // cannot be joined (`Bearer a, Bearer b`): given twice, it is refused.
            if let earlier = typed.first(where: { $0.caseInsensitiveCompare(name) == .orderedSame }),
                let sent = built.request.value(forHTTPHeaderField: earlier)
            {
                if Self.singleValueFields.contains(name.lowercased()) {
                    throw BuildError("header \(name) takes one value: it was given twice")
                }
                let separator = name.caseInsensitiveCompare("Cookie") == .orderedSame ? "; " : ", "
                built.request.setValue(sent.isEmpty ? value : (value.isEmpty ? sent : sent + separator + value), forHTTPHeaderField: name)
            } else {
                built.request.setValue(value, forHTTPHeaderField: name)
            }
            typed.append(name)
        }
        built.sessionHeaders = SessionHeaderScope(stored: baseHeaders, url: line.url, typed: typed)
        return built
    }

    /// Request fields whose value is not a list (RFC 9110, 9111, 6265): typing one twice is
    /// a mistake, not two values.
    static let singleValueFields: Set<String> = [
        "authorization", "proxy-authorization", "host", "content-type", "content-length", "user-agent", "referer",
        "from", "origin", "range", "if-range", "if-modified-since", "if-unmodified-since", "max-forwards", "date",
        "content-location", "content-range",
    ]

    /// The URL with the `name==value` items appended to its query.
    func urlWithQuery() throws -> URL {
        let pairs = line.items.compactMap { item -> String? in
            guard case .query(let name, let value) = item else { return nil }
            return percentEscapedString(name) + "=" + percentEscapedString(value)
        }
        guard !pairs.isEmpty else { return line.url }
        guard var components = URLComponents(url: line.url, resolvingAgainstBaseURL: false) else {
            throw BuildError("'\(line.url.absoluteString)' cannot take query parameters")
        }
        let existing = components.percentEncodedQuery.map { $0.isEmpty ? [] : [$0] } ?? []
        components.percentEncodedQuery = (existing + pairs).joined(separator: "&")
        guard let url = components.url else { throw BuildError("'\(line.url.absoluteString)' cannot take query parameters") }
        return url
    }

    /// The data fields as the text of a JSON object; a name given twice becomes an array.
    func jsonBodyText() throws -> String {
        var body = JSONBodyText()
        for item in line.items {
            switch item {
            case .field(let key, let text):
                try body.add(key, string: text)
            case .fieldFromFile(let key, let path):
                try body.add(key, string: try readText(path, item: "\(key)=@\(path)"))
            case .jsonField(let key, let json):
                body.add(key, jsonText: try validatedJSON(json, item: "\(key):=\(json)"))
            case .jsonFieldFromFile(let key, let path):
                body.add(key, jsonText: try validatedJSON(try readText(path, item: "\(key):=@\(path)"), item: "\(key):=@\(path)"))
            default:
                continue
            }
        }
        return try body.text()
    }

    private func formRequest(method: String, urlString: String, multipart: Bool) throws -> URLRequest {
        var parameters: [String: any Sendable] = [:]
        for item in line.items {
            let name: String
            let value: String
            switch item {
            case .field(let key, let text): (name, value) = (key, text)
            case .fieldFromFile(let key, let path): (name, value) = (key, try readText(path, item: "\(key)=@\(path)"))
            case .jsonField(let key, _), .jsonFieldFromFile(let key, _):
                throw BuildError("'\(key)' is a raw JSON field (name:=json): a form cannot carry it")
            default: continue
            }
            if let existing = parameters[name] as? [String] {
                parameters[name] = existing + [value]
            } else if let existing = parameters[name] as? String {
                parameters[name] = [existing, value]
            } else {
                parameters[name] = value
            }
        }
        var serializer = HTTPRequestSerializer()
        serializer.httpMethodsEncodingParametersInURI = []
        guard multipart else {
            return try serializer.request(method: method, urlString: urlString, parameters: parameters)
        }
        var files: [(name: String, url: URL)] = []
        for case .fileField(let name, let path) in line.items {
            let file = resolve(path)
            try requireReadableFile(file, item: "\(name)@\(path)")
            files.append((name, file))
        }
        return try serializer.multipartFormRequest(method: method, urlString: urlString, parameters: parameters) { form in
            for file in files { try form.appendPart(withFileURL: file.url, name: file.name) }
        }
    }

    private func resolve(_ path: String) -> URL {
        let expanded = (path as NSString).expandingTildeInPath
        return expanded.hasPrefix("/") ? URL(fileURLWithPath: expanded) : directory.appendingPathComponent(expanded)
    }

    /// Whether `file` (its link followed) is a regular file, which can be streamed with its
    /// length known.
    static func isRegularFile(_ file: URL) -> Bool {
        var status = stat()
        return stat(file.path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    private func requireReadableFile(_ file: URL, item: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory), !isDirectory.boolValue,
            FileManager.default.isReadableFile(atPath: file.path)
        else { throw BuildError("'\(item)': \(file.path) is not a readable file") }
    }

    private func readText(_ path: String, item: String) throws -> String {
        let file = resolve(path)
        try requireReadableFile(file, item: item)
        guard let data = try? Data(contentsOf: file), let text = String(data: data, encoding: .utf8) else {
            throw BuildError("'\(item)': \(file.path) is not UTF-8 text")
        }
        return text
    }

    /// `text`, trimmed, once `JSONSerialization` accepts it as one JSON value.
    private func validatedJSON(_ text: String, item: String) throws -> String {
        // A file's byte order mark, which JSONSerialization skips, is no part of the body.
        let text = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        guard (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil else {
            throw BuildError("'\(item)': not valid JSON")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A request that cannot be built from the arguments.
struct BuildError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
