import Foundation

/// The positional arguments of a request, sorted out: `[METHOD] URL [ITEM ...]`.
struct RequestLine: Equatable, Sendable {
    /// The method as given (upper-cased), nil when it was left out.
    var method: String?
    /// The URL, with the shorthands expanded.
    var url: URL
    /// The request items, in order.
    var items: [RequestItem]

    /// The method to send: the one given, else POST when an item carries data, else GET.
    var effectiveMethod: String {
        method ?? (items.contains(where: \.carriesData) ? "POST" : "GET")
    }

    /// Methods recognised as such even when what follows could be an item.
    static let knownMethods: Set<String> = [
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "QUERY",
    ]

    /// Sorts the positional arguments out.
    ///
    /// The first is the method when it is only letters and either a method curlew knows or
    /// followed by something that is not an item or is plainly a URL (`curlew PURGE
    /// example.com`, `curlew PURGE https://cdn.example.com/x`, `curlew MKCOL
    /// localhost:8080/dav/`: the last two also read as headers); otherwise it is the URL
    /// (`curlew localhost a=b` asks localhost).
    static func parse(_ arguments: [String]) throws(RequestLineError) -> RequestLine {
        guard let first = arguments.first else { throw .missingURL }
        var rest = arguments.dropFirst()
        var method: String?
        if first.allSatisfy({ $0.isASCII && $0.isLetter }), let next = rest.first,
            knownMethods.contains(first.uppercased()) || RequestItem.parse(next) == nil || isPlainlyURL(next)
        {
            method = first.uppercased()
        }
        guard let urlText = (method == nil ? first : rest.popFirst()) else { throw .missingURL }
        if readsAsItemNotURL(urlText) { throw .itemWhereURLWas(urlText) }
        let url = try expandURL(urlText)
        var items: [RequestItem] = []
        for text in rest {
            guard let item = RequestItem.parse(text) else { throw .notAnItem(text) }
            items.append(item)
        }
        return RequestLine(method: method, url: url, items: items)
    }

    /// HTTPie's shorthands: `:3000/x` is `http://localhost:3000/x`, `:/x` is
    /// `http://localhost/x`, and a URL without a scheme gets `http://`.
    static func expandURL(_ text: String) throws(RequestLineError) -> URL {
        var expanded = text
        if expanded.hasPrefix("://") {
            expanded = "http" + expanded
        } else if expanded.hasPrefix(":") {
            let rest = expanded.dropFirst()
            let port = rest.prefix { $0.isNumber }
            let path = rest.dropFirst(port.count)
            expanded = "http://localhost" + (port.isEmpty ? "" : ":" + port) + path
        } else if !hasScheme(expanded) {
            // A scheme only at the start: `example.com/login?next=http://a/` has none.
            expanded = "http://" + expanded
        }
        guard let url = URL(string: expanded), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty
        else { throw .badURL(text) }
        return url
    }
}

extension RequestLine {
    /// Whether `text` starts with a scheme and `://` (RFC 3986's scheme characters).
    static func hasScheme(_ text: String) -> Bool {
        guard let separator = text.range(of: "://") else { return false }
        let scheme = text[..<separator.lowerBound]
        guard let first = scheme.first, first.isASCII, first.isLetter else { return false }
        return scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == ".") }
    }

    /// Whether `text`, in the URL's place, is a request item that carries data or a query
    /// (`@backup.zip`, `photo@img.zip`, `a=b`): the URL was left out. Taken for one,
    /// `@backup.zip` became `http://@backup.zip`, a real host under a real top-level domain,
    /// and `--auth`'s credential went to it in the clear. A name with `/`, `?` or `#` is a
    /// URL's path or query (`example.com/search?q=a`); a text with a scheme is a URL; a
    /// header's shape (`example.com:8080/x`) is read as a URL as before.
    static func readsAsItemNotURL(_ text: String) -> Bool {
        guard !hasScheme(text), !text.hasPrefix(":"), let item = RequestItem.parse(text) else { return false }
        switch item {
        case .header: return false
        case .body: return true
        case .query(let name, _), .field(let name, _), .fieldFromFile(let name, _), .jsonField(let name, _),
            .jsonFieldFromFile(let name, _), .fileField(let name, _):
            return !name.contains(where: { "/?#".contains($0) })
        }
    }

    /// Whether `text`, which may also read as a header item, is plainly a URL: it starts with
    /// a scheme, or is `localhost`, a dotted name or a bracketed IPv6 address with a port
    /// (`example.com:8080/x`; a header's name has no dot, and its value is rarely a number
    /// followed by a path).
    static func isPlainlyURL(_ text: String) -> Bool {
        if hasScheme(text) { return true }
        if text.hasPrefix("["), text.contains("]") { return true }  // [::1]:8080/x
        guard let colon = text.firstIndex(of: ":") else { return false }
        let host = text[..<colon]
        let afterColon = text[text.index(after: colon)...]
        let port = afterColon.prefix { $0.isASCII && $0.isNumber }
        guard !port.isEmpty, port.count <= 5 else { return false }
        let tail = afterColon.dropFirst(port.count)
        guard tail.isEmpty || tail.first == "/" || tail.first == "?" else { return false }
        return host.lowercased() == "localhost" || host.contains(".")
    }
}

/// Why the positional arguments are not a request.
enum RequestLineError: Error, Equatable, CustomStringConvertible {
    case missingURL
    case badURL(String)
    case notAnItem(String)
    case itemWhereURLWas(String)

    var description: String {
        switch self {
        case .missingURL: return "no URL given: curlew [METHOD] URL [ITEM ...]"
        case .badURL(let text): return "'\(text)' is not an http or https URL"
        case .itemWhereURLWas(let text):
            return "'\(text)' is a request item where the URL goes: curlew [METHOD] URL [ITEM ...] (a URL that reads as an item needs its scheme: http://...)"
        case .notAnItem(let text):
            return "'\(text)' is not a request item (Name:value, name==value, name=value, name:=json, name@file, @file)"
        }
    }
}
