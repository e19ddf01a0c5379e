import Foundation
import HTTPTypes
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension HTTPRequest {
    /// The request `urlRequest` describes: its method, URL (as `:scheme`, `:authority` and
    /// `:path` with the query) and header fields.
    ///
    /// `URLRequest` keeps its fields in a dictionary, so their order is not known (they come
    /// sorted by name, for a stable result; an `Authorization` made from the URL's
    /// credentials last) and a field it holds combined stays combined.
    /// The body is not part of an `HTTPRequest`: send it alongside.
    ///
    /// Credentials in the URL (`https://ann:pw@host/`) have no place in `:authority`; they
    /// become `Authorization: Basic …` (percent-decoded, as libcurl sends them for such a
    /// URL), unless the request names an `Authorization` of its own, which then wins as it
    /// does in libcurl. They were dropped, and the request went out without them.
    ///
    /// - Throws: ``HTTPTypesConversionError`` when the request has no usable URL or method.
    public init(_ urlRequest: URLRequest) throws(HTTPTypesConversionError) {
        guard let url = urlRequest.url, let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let scheme = components.scheme, let host = components.percentEncodedHost, !host.isEmpty
        else { throw .missingURL }
        let methodName = urlRequest.httpMethod ?? "GET"
        guard let method = HTTPRequest.Method(methodName) else { throw .invalidMethod(methodName) }
        var authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        if let port = components.port { authority += ":\(port)" }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        var fields = HTTPFields()
        for (name, value) in (urlRequest.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            // Refused, not skipped or changed: a skipped `X Api Key` was a credential lost
            // without a word, and `HTTPField` quietly rewrites a value with a CR or LF.
            // Spaces and tabs around a value are no part of it (RFC 9110 §5.5; `HTTPField`
            // trims them too); what is left must be a field value.
            let value = value.trimmingCharacters(in: Self.fieldWhitespace)
            guard let fieldName = HTTPField.Name(name), HTTPField.isValidValue(value) else { throw .invalidHeaderField(name) }
            // The authority is `:authority`; a `Host` field beside it names the same, or conflicts.
            if fieldName.canonicalName == "host" {
                guard URLRequest.namesSameAuthority(value, authority, scheme: scheme) else { throw .conflictingHostField(value) }
                continue
            }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        if let user = components.percentEncodedUser, !user.isEmpty || components.percentEncodedPassword != nil,
            fields[.authorization] == nil
        {
            // Decoded to bytes, not through `user`/`password`, which are nil for escapes that
            // are not UTF-8 (`p%E9ss`): libcurl sends the bytes.
            let pair = Self.percentDecoded(user) + [UInt8(ascii: ":")] + Self.percentDecoded(components.percentEncodedPassword ?? "")
            fields[.authorization] = "Basic " + Data(pair).base64EncodedString()
        }
        self.init(method: method, scheme: scheme.lowercased(), authority: authority, path: path, headerFields: fields)
    }
}

extension HTTPRequest {
    /// Space and horizontal tab, which may surround a field value (RFC 9110 §5.5).
    static let fieldWhitespace = CharacterSet(charactersIn: " \t")

    /// The bytes `text` stands for, each `%XX` decoded; a `%` not followed by two hex digits
    /// stays as it is.
    static func percentDecoded(_ text: String) -> [UInt8] {
        let utf8 = Array(text.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count,
                let high = hexValue(utf8[index + 1]), let low = hexValue(utf8[index + 2])
            {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return bytes
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension URLRequest {
    /// The `URLRequest` for `request`: the URL from `:scheme`, `:authority` and `:path`, the
    /// method, and the header fields. A repeated field is combined the way HTTP allows: values
    /// joined with ", ", or with "; " for `Cookie` (RFC 9113 §8.2.3).
    ///
    /// - Throws: ``HTTPTypesConversionError`` when there is no scheme or authority, or the
    ///   target cannot be sent (`OPTIONS *`, CONNECT, extended CONNECT), or the authority is
    ///   more than a host and port (userinfo, a path, a query or fragment: RFC 9113 §8.3.1).
    public init(_ request: HTTPRequest) throws(HTTPTypesConversionError) {
        if let extended = request.extendedConnectProtocol { throw .unsupportedTarget(":protocol \(extended)") }
        // A tunnel, not a request for a resource: libcurl would send `CONNECT /` to the host.
        if request.method == .connect { throw .unsupportedTarget("CONNECT \(request.authority ?? "")") }
        guard let scheme = request.scheme, let authority = request.authority, !authority.isEmpty else {
            throw .missingSchemeOrAuthority
        }
        // Pasted in front of the path, `good.example@evil.example` would connect to the second
        // host, `evil.example#.good.example` defeat a suffix check, `h/x?` change the path.
        guard !authority.unicodeScalars.contains(where: { "@/?#\\".unicodeScalars.contains($0) || $0.properties.isWhitespace })
        else { throw .invalidURL(authority) }
        let path = request.path ?? "/"
        guard path.hasPrefix("/") else { throw .unsupportedTarget(path) }
        let text = "\(scheme)://\(authority)\(path)"
        guard let url = URL(string: text), url.host != nil else { throw .invalidURL(text) }
        self.init(url: url)
        httpMethod = request.method.rawValue
        try Self.checkHostField(request.headerFields, authority: authority, scheme: scheme)
        for name in Self.orderedNames(request.headerFields) where name.canonicalName != "host" {
            let values = request.headerFields[values: name]
            let separator = name == .cookie ? "; " : ", "
            setValue(values.joined(separator: separator), forHTTPHeaderField: name.rawName)
        }
    }

    /// A `Host` field beside the authority must name it (it is then the same field, and not
    /// sent twice); one naming another host is refused: libcurl sends a caller's `Host`, and
    /// picks and files the jar's cookies under its name.
    package static func checkHostField(_ fields: HTTPFields, authority: String, scheme: String?) throws(HTTPTypesConversionError) {
        for field in fields where field.name.canonicalName == "host" && !namesSameAuthority(field.value, authority, scheme: scheme) {
            throw .conflictingHostField(field.value)
        }
    }

    /// Whether two authorities name the same host and port: compared without case, IPv6
    /// brackets, a host's trailing dot, or the scheme's default port (`h:443` is `h` for https).
    package static func namesSameAuthority(_ first: String, _ second: String, scheme: String?) -> Bool {
        func normalized(_ authority: String) -> (host: String, port: String) {
            var text = Substring(authority.lowercased())
            var port = ""
            if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
                let rest = text[text.index(after: close)...]
                if rest.hasPrefix(":") { port = String(rest.dropFirst()) }
                text = text[text.index(after: text.startIndex)..<close]
            } else if let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") {
                port = String(text[text.index(after: colon)...])
                text = text[..<colon]
            }
            if text.hasSuffix(".") { text = text.dropLast() }
            let defaultPort = scheme?.lowercased() == "https" ? "443" : "80"
            return (String(text), port == defaultPort ? "" : port)
        }
        return normalized(first) == normalized(second)
    }

    /// Each field name once, in the order of its first appearance.
    private static func orderedNames(_ fields: HTTPFields) -> [HTTPField.Name] {
        var seen = Set<HTTPField.Name>()
        return fields.compactMap { seen.insert($0.name).inserted ? $0.name : nil }
    }
}
