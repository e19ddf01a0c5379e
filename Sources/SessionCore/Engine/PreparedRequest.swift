import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `URLRequest` checked and translated into what libcurl needs, before any byte is sent.
///
/// Validation happens here, on the caller's thread, so that a malformed URL, an unsupported
/// scheme or a header with CR/LF (header injection, reliability.md E4) is a delivered error
/// and never a request on the wire.
///
/// Immutable, and a class: it travels from the task to its delegate and is copied a few
/// times per request; as a struct holding Foundation's resilient types (`URL`, `Data`), every
/// copy and destruction went through runtime metadata (~400 instructions each).
final class PreparedRequest: Sendable {
    let url: URL
    /// `url.absoluteString`, computed once (libcurl's `CURLOPT_URL`).
    let urlString: String
    /// The scheme and origin of `urlString`, found once as bytes.
    let urlOrigin: URLOrigin
    /// `urlString` as parsed by libcurl, for `CURLOPT_CURLU`; nil only for a request that is
    /// never sent (`placeholder(for:)`), which would fall back to `CURLOPT_URL`.
    let curlURL: CurlURL?
    let method: String
    /// `method` sorted once, here on the caller's thread: the driver picks curl's options by
    /// it. Comparing the string there took the standard library's slow path for each literal
    /// it was not (~70 instructions a comparison, two for every GET).
    let methodKind: MethodKind
    /// "Name: value" lines for `CURLOPT_HTTPHEADER`, already validated.
    let headerLines: [String]
    /// The `Accept-Encoding` value curl sends and decodes (empty: every encoding curl supports;
    /// nil: none is asked for and nothing is decoded, for a byte range the caller asked for).
    let acceptEncoding: String?
    let body: RequestBody
    let hasCookieHeader: Bool
    /// The request names its own `Host`: libcurl before 8.20 ties the handle's cookies to that
    /// name for good (`CurlRuntime.keepsCookieHost`), so the handle is not used again.
    let namesHost: Bool
    /// The caller set an `Expect` header (otherwise `TaskDelegate.configure` suppresses
    /// curl's own for a request with a body).
    let hasExpectHeader: Bool
    /// The request's `timeoutInterval` and `httpShouldHandleCookies`, read here on the caller's
    /// thread: each `URLRequest` getter goes through its Foundation object (~100-150
    /// instructions), which the driver thread every transfer shares need not pay.
    let timeoutInterval: TimeInterval
    let handlesCookies: Bool
    /// The host and port of an `https` URL (`ParsedURLCache.TLSTarget`); nil for others.
    let tlsTarget: ParsedURLCache.TLSTarget?
    /// When the task's first request began to be adapted (`TaskDelegate.uptime`), set on the
    /// adapted request: the resource timeout counts from then, not from the transfer's start.
    let adaptationStart: UInt64?

    init(
        url: URL, urlString: String, method: String, headerLines: [String], acceptEncoding: String?,
        body: RequestBody, hasCookieHeader: Bool, namesHost: Bool = false, hasExpectHeader: Bool = false,
        urlOrigin: URLOrigin? = nil,
        curlURL: CurlURL? = nil, timeoutInterval: TimeInterval = 60, handlesCookies: Bool = true,
        tlsTarget: ParsedURLCache.TLSTarget? = nil, adaptationStart: UInt64? = nil
    ) {
        self.url = url
        self.urlString = urlString
        self.urlOrigin = urlOrigin ?? URLOrigin(urlString)
        self.curlURL = curlURL
        self.method = method
        methodKind = MethodKind(method)
        self.headerLines = headerLines
        self.acceptEncoding = acceptEncoding
        self.body = body
        self.hasCookieHeader = hasCookieHeader
        self.namesHost = namesHost
        self.hasExpectHeader = hasExpectHeader
        self.timeoutInterval = timeoutInterval
        self.handlesCookies = handlesCookies
        self.tlsTarget = tlsTarget
        self.adaptationStart = adaptationStart
    }

    /// RFC 9110 §9.2.2's idempotent methods: a request the client may send again on its own.
    static let idempotentMethods: Set<String> = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"]

    /// The methods curl is told about by an option of their own; any other is `other`.
    enum MethodKind: Equatable {
        case get, head, post, put, patch, other

        init(_ method: String) {
            switch method {
            case "GET": self = .get
            case "HEAD": self = .head
            case "POST": self = .post
            case "PUT": self = .put
            case "PATCH": self = .patch
            default: self = .other
            }
        }
    }

    /// The same request with another body (and, for a task's adapted first request, when its
    /// adaptation began).
    func with(body: RequestBody, adaptationStart: UInt64? = nil) -> PreparedRequest {
        PreparedRequest(
            url: url, urlString: urlString, method: method, headerLines: headerLines, acceptEncoding: acceptEncoding,
            body: body, hasCookieHeader: hasCookieHeader, namesHost: namesHost, hasExpectHeader: hasExpectHeader,
            urlOrigin: urlOrigin,
            curlURL: curlURL, timeoutInterval: timeoutInterval, handlesCookies: handlesCookies, tlsTarget: tlsTarget,
            adaptationStart: adaptationStart ?? self.adaptationStart)
    }

    /// The same request with `lines` added to its header lines.
    func adding(headerLines lines: [String]) -> PreparedRequest {
        PreparedRequest(
            url: url, urlString: urlString, method: method, headerLines: headerLines + lines,
            acceptEncoding: acceptEncoding, body: body, hasCookieHeader: hasCookieHeader, namesHost: namesHost,
            hasExpectHeader: hasExpectHeader, urlOrigin: urlOrigin, curlURL: curlURL,
            timeoutInterval: timeoutInterval, handlesCookies: handlesCookies, tlsTarget: tlsTarget, adaptationStart: adaptationStart)
    }

    static let supportedSchemes: Set<String> = ["http", "https"]

    /// Validates `request` and merges the configuration's additional headers under it.
    /// With `omittingCredentials`, the configuration's `Authorization`, `Cookie` and
    /// `Proxy-Authorization` headers are not added (a redirect crossed to another origin).
    /// `urls`: the manager's recently prepared URLs, consulted and filled.
    static func prepare(
        _ request: URLRequest, configuration: SessionConfiguration, omittingCredentials: Bool = false,
        urls: ParsedURLCache? = nil
    ) throws(SessionError) -> PreparedRequest {
        guard let url = request.url else { throw .badURL("the request has no URL") }
        let absolute = url.absoluteString
        let parsed: ParsedURLCache.Entry
        if let kept = urls?.entry(for: absolute) {
            parsed = kept
        } else {
            parsed = try parse(absolute, url: url)
            urls?.keep(parsed)
        }

        let method = request.httpMethod ?? "GET"
        // "GET" (a small string: compared in registers) needs no byte-by-byte check.
        guard method == "GET" || HTTPHeaderValidation.isToken(method) else {
            throw .badURL("invalid HTTP method '\(method.debugDescription)'")
        }

        // Each name is lowercased once; the few fields of a request make a linear search the
        // cheapest way to merge.
        var merged: [(lower: String, name: String, value: String)] = []
        if let fields = request.allHTTPHeaderFields {
            merged.reserveCapacity(fields.count + configuration.httpAdditionalHeaders.count)
            for (name, value) in fields { merged.append((name.lowercased(), name, value)) }
        }
        let requestFieldCount = merged.count
        for (name, value) in configuration.httpAdditionalHeaders {
            let lower = name.lowercased()
            guard !merged[..<requestFieldCount].contains(where: { $0.lower == lower }) else { continue }
            if omittingCredentials && RedirectPolicy.credentialHeaders.contains(lower) { continue }
            merged.append((lower, name, value))
        }
        if merged.count > 1 { merged.sort { $0.lower < $1.lower } }  // deterministic order on the wire

        var lines: [String] = []  // no storage while empty
        if !merged.isEmpty { lines.reserveCapacity(merged.count + 2) }
        var acceptEncoding = ""
        var asksForEncoding = false
        var hasRange = false
        var hasExpect = false
        var hasCookie = false
        var hasHost = false
        for (lower, name, value) in merged {
            try validateHeader(name: name, value: value)
            switch lower {
            case "accept-encoding":
                // curl sends it and decodes what it can; the caller's list wins over curl's.
                acceptEncoding = value
                asksForEncoding = true
                continue
            case "content-length":
                // curl writes it from the body we give it; a caller-set value that disagreed
                // with the body would desynchronise the connection.
                continue
            case "transfer-encoding":
                // The body's framing is curl's too: its length, or chunks for a stream of
                // unknown length. A caller's field went out beside it: `gzip` beside the
                // `Content-Length` curl writes (the pair RFC 9112 §6.2 forbids, which servers
                // and proxies read two ways), `chunked` on a bodiless GET (the server waited
                // for chunks that never came).
                continue
            case "range": hasRange = true
            case "expect": hasExpect = true
            case "cookie": hasCookie = true
            case "host": hasHost = true
            default: break
            }
            // "Name;" is curl's syntax for a header with an empty value ("Name:" would remove it).
            lines.append(value.isEmpty ? name + ";" : name + ": " + value)
        }
        if merged.isEmpty {
            // The usual request: no field of its own, nor one the session adds. Its lines are
            // the one shared list, not an array of its own.
            lines = CurlRuntime.defaultHeaderLines
        } else if hasRange && !asksForEncoding {
            // A byte range of a content-coded representation is a range of its encoded bytes,
            // which cannot be decoded on their own (libcurl failed the transfer: "unknown
            // compression method"): the range is asked for as is, and delivered as sent, as a
            // download's resumed part is. A caller who names codings keeps them.
        } else {
            // The line libcurl would format for `CURLOPT_ACCEPT_ENCODING` (set in `configure`,
            // so it decodes the answer), written here once instead of by curl's printf per request.
            lines.append(acceptEncoding.isEmpty ? CurlRuntime.defaultAcceptEncodingLine : "Accept-Encoding: " + acceptEncoding)
        }
        let body: RequestBody
        if let data = request.httpBody {
            body = .data(data)
        } else if let multipart = request.httpBodyStream as? MultipartBodyStream {
            // Its length is known exactly; a `Content-Length` of the caller's (set after the
            // form was built) cut the body short at that length, with no closing boundary.
            body = .stream(multipart, length: multipart.contentLength)
        } else if let stream = request.httpBodyStream {
            body = .stream(stream, length: try declaredLength(request.value(forHTTPHeaderField: "Content-Length")))
        } else {
            body = .none
        }

        return PreparedRequest(
            url: url, urlString: absolute, method: method, headerLines: lines,
            acceptEncoding: hasRange && !asksForEncoding ? nil : acceptEncoding, body: body, hasCookieHeader: hasCookie,
            namesHost: hasHost, hasExpectHeader: hasExpect,
            urlOrigin: parsed.origin, curlURL: parsed.curlURL, timeoutInterval: request.timeoutInterval,
            handlesCookies: request.httpShouldHandleCookies, tlsTarget: parsed.tlsTarget)
    }

    /// Validates an absolute URL string and has libcurl parse it.
    private static func parse(_ absolute: String, url: URL) throws(SessionError) -> ParsedURLCache.Entry {
        let origin = URLOrigin(absolute)
        guard !origin.scheme.isEmpty else { throw .badURL("'\(absolute)' has no scheme") }
        guard supportedSchemes.contains(origin.scheme) else { throw .unsupportedScheme(origin.scheme) }
        // A percent-encoded host is a name only if it decodes (Foundation's check, on this
        // rare path only: `http://%FF/` has no host).
        guard origin.hasHost, !origin.hostIsPercentEncoded || !(url.host ?? "").isEmpty else {
            throw .badURL("'\(absolute)' has no host")
        }
        // Spaces and control characters would be rejected or, worse, interpreted by the server.
        if !HTTPHeaderValidation.isValidURLString(absolute) {
            throw .badURL("'\(absolute.debugDescription)' contains spaces or control characters")
        }
        // Parsed by libcurl here, once: the driver thread then only copies the result.
        return ParsedURLCache.Entry(
            string: absolute, origin: origin, curlURL: try CurlURL(parsing: absolute),
            tlsTarget: origin.isHTTPS ? ParsedURLCache.TLSTarget(url) : nil)
    }

    /// Whether a transfer to `origin` may share a connection with others (HTTP/2): over TLS
    /// with ALPN under `.http2`, or always with prior knowledge. Never on cleartext `.http2`.
    static func canMultiplex(_ origin: URLOrigin, version: SessionConfiguration.HTTPVersion) -> Bool {
        switch version {
        case .http1_1: return false
        case .http2: return origin.isHTTPS
        case .http2PriorKnowledge: return true
        }
    }

    /// The length a caller's `Content-Length` declares for a body stream (RFC 9110 §8.6: digits
    /// only), nil without one. Any other value is refused: `Int64` read "-1" (a copied
    /// `NSURLResponseUnknownLength`) as a length, and the stream went out as an empty body.
    static func declaredLength(_ value: String?) throws(SessionError) -> Int64? {
        guard let value else { return nil }
        let digits = value.trimmingCharacters(in: .whitespaces)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let length = Int64(digits)
        else { throw .invalidHeader("Content-Length '\(value)' is not a length in bytes") }
        return length
    }

    /// Header names must be RFC 9110 tokens; values must not contain CR, LF, NUL, other control
    /// characters or DEL (tab is allowed): the serializers' rule, `HTTPHeaderValidation`.
    static func validateHeader(name: String, value: String) throws(SessionError) {
        guard HTTPHeaderValidation.isToken(name) else {
            throw .invalidHeader("invalid header name '\(name.debugDescription)'")
        }
        guard HTTPHeaderValidation.isValidValue(value) else {
            throw .invalidHeader("the value of '\(name)' contains a control character (only tab is allowed)")
        }
    }
}

/// Where a request's body comes from.
///
/// `@unchecked Sendable` for the stream case, on the same terms as `URLRequest` (which is
/// Sendable while carrying `httpBodyStream`): one owner reads the stream at a time — the
/// task until it starts, then the driver thread.
enum RequestBody: @unchecked Sendable {
    case none
    case data(Data)
    /// A stream read lazily (on a body pump's queue when it may block); `length` nil means
    /// chunked upload.
    case stream(InputStream, length: Int64?)
    /// A file read lazily on the driver thread.
    case file(URL)
    /// A caller's async sequence, iterated in a task of its own (`upload(for:from:)`).
    case feed(AsyncBodyFeed)

    var isEmpty: Bool {
        if case .none = self { return true }
        return false
    }
}

extension PreparedRequest {
    /// Stands in for a request that failed validation; it is never sent.
    static func placeholder(for request: URLRequest) -> PreparedRequest {
        let url = request.url ?? URL(fileURLWithPath: "/")
        return PreparedRequest(
            url: url, urlString: url.absoluteString, method: "GET", headerLines: [], acceptEncoding: "",
            body: .none, hasCookieHeader: false)
    }
}
